// A machine joining again after a CA rotation (docs/adr/rejoin-after-ca-rotation.md): the
// proof's signature, read back by the approver's own reader, and the approver's rule over it,
// table by table. Each refusal row fails when its check in src/operator/identity/decide.ts is
// removed; the takeover rows are the ones an attacker with the bootstrap token would try.
import { createPublicKey } from "node:crypto";
import { describe, expect, it } from "vitest";
import {
  ANNOTATION_REJOIN_KEY,
  ANNOTATION_REJOIN_SIGNATURE,
  ANNOTATION_REJOIN_SIGNED_AT,
  keyDigest,
  readRejoinProof,
  rejoinAnnotations,
  type RejoinProof,
} from "../../src/api/rejoin-proof.js";
import { newKey } from "../../src/agent/identity/request.js";
import {
  decideCsr,
  REJOIN_PROOF_SKEW_MS,
  type CsrView,
  type CsrWorld,
  type Target,
} from "../../src/operator/identity/decide.js";

const NOW = Date.parse("2026-12-05T10:00:00Z");
const OLD = newKey();
const NEW = newKey();
const spki = (pem: string): Buffer => createPublicKey(pem).export({ type: "spki", format: "der" });

describe("the rejoin proof", () => {
  it("verifies for the key it signs and the name, and gives the old key's digest", () => {
    const a = rejoinAnnotations("m1", NEW, OLD, new Date(NOW));
    expect(readRejoinProof(a, "m1", spki(NEW))).toEqual({
      keyDigest: keyDigest(OLD),
      signedAtMs: NOW,
    });
  });

  it.each<[string, (a: Record<string, string>) => Record<string, string>, string, string]>([
    ["copied onto another request's key", (a) => a, "m1", "does not verify"],
    ["used for another machine's name", (a) => a, "m2", "does not verify"],
    [
      "with its time changed",
      (a) => ({ ...a, [ANNOTATION_REJOIN_SIGNED_AT]: new Date(NOW + 1).toISOString() }),
      "m1",
      "does not verify",
    ],
    [
      "with another key put in",
      (a) => ({
        ...a,
        [ANNOTATION_REJOIN_KEY]: spki(newKey()).toString("base64"),
      }),
      "m1",
      "does not verify",
    ],
    [
      "without its signature",
      (a) => {
        const { [ANNOTATION_REJOIN_SIGNATURE]: _, ...rest } = a;
        return rest;
      },
      "m1",
      "only some of",
    ],
    [
      "with a key that is not one",
      (a) => ({ ...a, [ANNOTATION_REJOIN_KEY]: "bm90IGEga2V5" }),
      "m1",
      "is not a public key",
    ],
  ])("does not hold %s", (what, change, machine, said) => {
    const a = change(rejoinAnnotations("m1", NEW, OLD, new Date(NOW)));
    // The first row checks the proof against another request's key (an attacker's).
    const key = what.startsWith("copied") ? spki(newKey()) : spki(NEW);
    const got = readRejoinProof(a, machine, key);
    expect(got).toHaveProperty("invalid");
    expect((got as { invalid: string }).invalid).toContain(said);
  });

  it("is absent when the request carries none of its annotations", () => {
    expect(readRejoinProof({ other: "x" }, "m1", spki(NEW))).toBeUndefined();
  });
});

const BOOTSTRAP = {
  username: "system:bootstrap:abcdef",
  groups: ["system:bootstrappers", "system:bootstrappers:liken", "system:authenticated"],
};
const PROOF: RejoinProof = { keyDigest: keyDigest(OLD), signedAtMs: NOW - 2000 };
/** The Machine of m1: joined, its certificate valid for an hour, its key reported. */
const JOINED: Target = {
  node: true,
  nodeLabelled: false,
  machine: true,
  certificateExpiryMs: NOW + 3_600_000,
  certificateKeyDigest: keyDigest(OLD),
};

function csr(rejoin: CsrView["rejoin"], over: Partial<CsrView> = {}): CsrView {
  return {
    name: "liken-m1-b",
    createdMs: NOW - 1000,
    signerName: "kubernetes.io/kube-apiserver-client",
    usages: ["client auth"],
    ...BOOTSTRAP,
    state: "Pending",
    request: {
      commonName: "liken:machine:m1",
      organizations: ["liken:machines"],
      otherSubject: [],
      alternativeNames: 0,
      key: { kind: "ec", curve: "prime256v1" },
    },
    ...(rejoin === undefined ? {} : { rejoin }),
    ...over,
  };
}

const world = (target: Target = JOINED, over: Partial<CsrWorld> = {}): CsrWorld => ({
  nowMs: NOW,
  target,
  all: [],
  autoApprove: true,
  ...over,
});

describe("decideCsr after a CA rotation", () => {
  it("approves a machine that proves the key its Machine reports, and says it rejoined", () => {
    const d = decideCsr(csr(PROOF), world());
    expect(d).toMatchObject({ kind: "approve", machine: "m1", rejoined: true });
    expect((d as { message: string }).message).toContain(keyDigest(OLD));
  });

  it("approves within the clock skew allowed, either way", () => {
    for (const skew of [REJOIN_PROOF_SKEW_MS, -REJOIN_PROOF_SKEW_MS]) {
      const c = csr({ ...PROOF, signedAtMs: NOW - 1000 + skew });
      expect(decideCsr(c, world())).toMatchObject({ kind: "approve" });
    }
  });

  it("approves a first join with a proof as any first join, not as a rejoin", () => {
    const target: Target = { node: true, nodeLabelled: false, machine: true };
    expect(decideCsr(csr(PROOF), world(target))).toEqual({
      kind: "approve",
      machine: "m1",
      message: "machine m1 joins with the bootstrap credential",
    });
  });

  it.each<[string, CsrView, CsrWorld, "deny" | "leave", string, string]>([
    [
      "no proof: the bootstrap token alone (a reinstalled machine, or an attacker)",
      csr(undefined),
      world(),
      "leave",
      "AlreadyJoined",
      "carries no proof",
    ],
    [
      "a proof whose signature does not hold",
      csr({ invalid: "the signature does not verify" }),
      world(),
      "deny",
      "RejoinProofInvalid",
      "the signature does not verify",
    ],
    [
      "a proof by another key than the Machine reported (a stolen older key, another machine's)",
      csr({ ...PROOF, keyDigest: keyDigest(NEW) }),
      world(),
      "leave",
      "RejoinKeyUnknown",
      `last reported key ${keyDigest(OLD)}`,
    ],
    [
      "a Machine that reports no key (an older agent, or a person cleared it)",
      csr(PROOF),
      world({ ...JOINED, certificateKeyDigest: undefined } as Target),
      "leave",
      "RejoinKeyUnknown",
      "reports no status.certificateKeyDigest",
    ],
    [
      "a proof signed long before its request",
      csr({ ...PROOF, signedAtMs: NOW - 1000 - REJOIN_PROOF_SKEW_MS - 1 }),
      world(),
      "deny",
      "RejoinProofStale",
      "more than 10 min apart",
    ],
    [
      "a proof signed long after its request (a clock far ahead)",
      csr({ ...PROOF, signedAtMs: NOW - 1000 + REJOIN_PROOF_SKEW_MS + 1 }),
      world(),
      "deny",
      "RejoinProofStale",
      "fix it",
    ],
    [
      "an issued certificate still valid, but the Machine's report of that key expired",
      csr(PROOF),
      world(
        { ...JOINED, certificateExpiryMs: NOW - 1 },
        {
          all: [
            csr(undefined, { name: "first", state: "Approved", issuedNotAfterMs: NOW + 60_000 }),
          ],
        },
      ),
      "leave",
      "RejoinKeyUnknown",
      "expired at",
    ],
    [
      "a proof that holds, while a person marked the Machine liken.sh/rejoin: manual (its key leaked)",
      csr(PROOF),
      world({ ...JOINED, rejoinMarker: "manual" }),
      "leave",
      "RejoinLeftForPerson",
      "kubectl annotate machine m1 liken.sh/rejoin-",
    ],
    [
      "a proof that holds, the Machine's key reported, the marker with another value",
      csr(PROOF),
      world({ ...JOINED, rejoinMarker: "auto" }),
      "leave",
      "RejoinLeftForPerson",
      'value "auto", not "manual"',
    ],
    [
      "no proof, while the Machine is marked",
      csr(undefined),
      world({ ...JOINED, rejoinMarker: "manual" }),
      "leave",
      "RejoinLeftForPerson",
      "carries the annotation liken.sh/rejoin",
    ],
    [
      "a join while the marked Machine reports no valid certificate (its status written by the key's holder)",
      csr(undefined),
      world({ node: true, nodeLabelled: false, machine: true, rejoinMarker: "manual" }),
      "leave",
      "RejoinLeftForPerson",
      "carries the annotation liken.sh/rejoin",
    ],
    [
      "a proof whose signature does not hold, while the Machine is marked: still denied",
      csr({ invalid: "the signature does not verify" }),
      world({ ...JOINED, rejoinMarker: "manual" }),
      "deny",
      "RejoinProofInvalid",
      "the signature does not verify",
    ],
  ])("%s", (_, c, w, kind, reason, said) => {
    const d = decideCsr(c, w);
    expect(d).toMatchObject({ kind, reason });
    expect((d as { message: string }).message).toContain(said);
  });

  it("leaves a marked Machine's own renewal alone: the rotation withdraws what it issues", () => {
    const renewal = csr(undefined, {
      username: "liken:machine:m1",
      groups: ["liken:machines", "system:authenticated"],
    });
    expect(decideCsr(renewal, world({ ...JOINED, rejoinMarker: "manual" }))).toMatchObject({
      kind: "approve",
    });
  });

  it("with automatic approval off, still leaves a proven rejoin to a person", () => {
    expect(decideCsr(csr(PROOF), world(JOINED, { autoApprove: false }))).toMatchObject({
      kind: "leave",
      reason: "AutoApprovalOff",
    });
  });
});
