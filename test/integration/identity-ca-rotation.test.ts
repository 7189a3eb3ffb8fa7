// A machine that already joined, after the cluster's client CA rotated
// (docs/adr/rejoin-after-ca-rotation.md), on the real control plane: its Machine reports a
// certificate valid for a day and that certificate's key digest, as its agent wrote them while
// it was trusted; the certificate itself is signed by a CA the API server does not trust (made
// here with openssl), which is what a rotation leaves. The agent gets 401s, joins again with the
// bootstrap credential and proves by the old key that it is the same machine; the real approver
// (as cluster-operator's ServiceAccount) approves it with a Normal Event, the controller
// manager's signer issues, without a person. The bootstrap token alone, or with a proof by any
// other key, is left for a person with its Event, and nothing is issued; a proof by the right
// key signed too long ago (RejoinProofStale), or copied from another request (its signature
// does not verify over this one: RejoinProofInvalid), is denied with its reason on the
// request's Denied condition. A person who annotated the Machine liken.sh/rejoin: manual before
// the rotation (docs/machine.md, "Identity") gets even a valid proof left to them
// (RejoinLeftForPerson); the machine's own identity cannot take that marker off.
import { CertificatesV1Api } from "@kubernetes/client-node";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { tempDir } from "../support/temp-dir.js";
import { loadRestConfig, Rest } from "../../src/api/rest.js";
import { LikenApi } from "../../src/api/index.js";
import { keyDigest, rejoinAnnotations } from "../../src/api/rejoin-proof.js";
import { newKey, requestCertificate, requestName } from "../../src/agent/identity/request.js";
import { CsrApprover } from "../../src/operator/identity/approver.js";
import { REJOIN_PROOF_SKEW_MS } from "../../src/operator/identity/decide.js";
import {
  bootstrapToken,
  capturedLog,
  csrEventReasons,
  installedIdentity,
  installIdentityRbac,
  machineIdentity,
  readCsr,
  startApprover,
  untilAcceptedAs,
  untrustedCertificate,
} from "../support/identity.js";
import {
  eventsWhere,
  kubeConfig,
  kubectl,
  mintClientCert,
  uniqueName,
  waitFor,
} from "../support/kube.js";

const api = new LikenApi(kubeConfig());
const stop = new AbortController();
const machines: string[] = [];
let approver: CsrApprover;
let bootstrap: string;

beforeAll(async () => {
  await installIdentityRbac();
  bootstrap = (await bootstrapToken()).kubeconfig;
  // No --csr-node-label: the Machines below, created ahead, are what the fleet expects.
  approver = await startApprover("identity-ca-rotation-test");
});

afterAll(async () => {
  stop.abort();
  await approver?.stop();
  for (const name of machines) await api.machines.delete(name).catch(() => undefined);
});

/**
 * A Machine that joined before the rotation: its certificate from the old CA (valid a day), and
 * its status as its agent reported them while the API server still accepted that certificate.
 */
async function joinedBeforeRotation(
  prefix: string,
): Promise<{ machine: string; certPem: string; keyPem: string }> {
  const machine = uniqueName(prefix);
  const old = untrustedCertificate(tempDir("liken-old-ca-"), `liken:machine:${machine}`);
  const m = await api.machines.create({
    apiVersion: "liken.sh/v1alpha1",
    kind: "Machine",
    metadata: { name: machine },
    spec: { cluster: uniqueName("rotated"), nodeName: machine },
  });
  machines.push(machine);
  const { X509Certificate } = await import("node:crypto");
  const notAfter = new Date(new X509Certificate(old.certPem).validTo).toISOString();
  await api.machines.replaceStatus({
    ...m,
    status: {
      certificateExpiry: notAfter.replace(/\.\d+Z$/, "Z"),
      certificateKeyDigest: keyDigest(old.keyPem),
    },
  });
  return { machine, ...old };
}

/** The requests filed for `machine`, as the admin lists them. */
async function requestsFor(machine: string): Promise<string[]> {
  const list = await kubeConfig().makeApiClient(CertificatesV1Api).listCertificateSigningRequest();
  return list.items
    .map((c) => c.metadata?.name ?? "")
    .filter((n) => n.startsWith(`liken-${machine}-`));
}

describe("a machine that joined, after the cluster's client CA rotated", () => {
  it("rejoins by itself, proving by its old key that it is the same machine", async () => {
    const { machine, certPem, keyPem } = await joinedBeforeRotation("rotated");
    const { log, lines } = capturedLog();
    const dir = tempDir("liken-rotated-");
    const user = `liken:machine:${machine}`;
    const kubeconfig = installedIdentity(dir, user, { certPem, keyPem });
    const identity = machineIdentity(machine, kubeconfig, bootstrap, log);
    await identity.ensure(stop.signal);
    expect(identity.status(Date.now())?.certificateKeyDigest).toBe(keyDigest(keyPem));
    const rest = new Rest(loadRestConfig(kubeconfig), "liken-test");
    let changes = 0;
    const renewing = identity.renewLoop(rest, stop.signal, () => changes++);
    await untilAcceptedAs(rest, user, () => changes > 0);
    // Approved by the approver, as a rejoin proven by the key the Machine reported.
    const [csr] = await requestsFor(machine);
    expect(csr).toBeDefined();
    const s = await readCsr(csr!);
    const approved = s.conditions.find((c) => c.type === "Approved");
    expect(approved?.reason).toBe("LikenMachineApproved");
    expect(approved?.message).toContain(`proving with the key ${keyDigest(keyPem)}`);
    await waitFor("the approver's Normal Event", async () =>
      (await csrEventReasons(csr!)).includes("CertificateRequestRejoined"),
    );
    const events = await eventsWhere(`involvedObject.name=${csr!}`);
    expect(events.find((e) => e.reason === "CertificateRequestRejoined")?.type).toBe("Normal");
    // The new identity: a new key, reported to the Machine from now on.
    const now = identity.status(Date.now())!;
    expect(now.condition).toMatchObject({ status: "True", reason: "Rejoined" });
    expect(now.certificateKeyDigest).not.toBe(keyDigest(keyPem));
    expect(lines.join("")).toContain("LIKEN_AGENT_IDENTITY_NOT_ACCEPTED");
    stop.abort();
    await renewing;
  }, 300_000);

  /**
   * What the bootstrap credential files for a joined machine, with a proof of `proof`'s kind:
   * none, by another key, by the machine's own key signed too long ago, or by its own key
   * copied from another request (the signature does not verify over this one's key).
   */
  function proofOf(
    proof: "none" | "other-key" | "stale" | "copied",
    machine: string,
    keyPem: string,
    oldKeyPem: string,
  ): Record<string, string> | undefined {
    const now = new Date();
    switch (proof) {
      case "none":
        return undefined;
      case "other-key":
        return rejoinAnnotations(machine, keyPem, newKey(), now);
      case "stale":
        return rejoinAnnotations(
          machine,
          keyPem,
          oldKeyPem,
          new Date(now.getTime() - REJOIN_PROOF_SKEW_MS - 60_000),
        );
      case "copied":
        return rejoinAnnotations(machine, newKey(), oldKeyPem, now);
    }
  }

  /**
   * Files a request for `machine` with the bootstrap credential and `annotations`, waits until
   * the approver decided it (approved or denied: a condition; left: the Event of `reason`),
   * and stops asking. Returns the request's name; the caller checks what was decided.
   */
  async function fileUntil(
    machine: string,
    keyPem: string,
    annotations: Record<string, string> | undefined,
    reason: string,
  ): Promise<string> {
    const asking = new AbortController();
    const filed = requestCertificate(new Rest(loadRestConfig(bootstrap), "liken-test"), {
      machine,
      keyPem,
      expirationSeconds: 3600,
      warnAfterMs: 60_000,
      log: pino({ level: "silent" }),
      signal: asking.signal,
      ...(annotations === undefined ? {} : { annotations }),
    }).catch((e: unknown) => e);
    const csr = requestName(machine, keyPem);
    try {
      await waitFor(
        `the approver's decision on ${csr} (expected: ${reason})`,
        async () =>
          (await readCsr(csr)).conditions.some((c) => ["Approved", "Denied"].includes(c.type)) ||
          (await csrEventReasons(csr)).includes(`CertificateRequest${reason}`),
      );
    } finally {
      asking.abort();
      await filed;
    }
    return csr;
  }

  it.each<[string, "none" | "other-key", string]>([
    ["the bootstrap token alone", "none", "AlreadyJoined"],
    ["the bootstrap token with a proof by another key", "other-key", "RejoinKeyUnknown"],
  ])(
    "%s does not take it over: left for a person, nothing issued",
    async (_, proof, reason) => {
      const { machine, keyPem: oldKeyPem } = await joinedBeforeRotation("takeover");
      const keyPem = newKey();
      const annotations = proofOf(proof, machine, keyPem, oldKeyPem);
      const csr = await fileUntil(machine, keyPem, annotations, reason);
      const s = await readCsr(csr);
      expect(s.conditions.map((c) => `${c.type}: ${c.reason}`)).toEqual([]);
      expect(s.certificate ?? "").toBe("");
      const events = await eventsWhere(`involvedObject.name=${csr}`);
      expect(events.find((e) => e.reason === `CertificateRequest${reason}`)?.message).toContain(
        "left for a person",
      );
    },
    120_000,
  );

  it.each<[string, "stale" | "copied", string, string]>([
    [
      "a proof by the machine's own key signed 11 minutes before its request",
      "stale",
      "RejoinProofStale",
      "more than 10 min apart",
    ],
    [
      "a proof by the machine's own key copied from another request",
      "copied",
      "RejoinProofInvalid",
      "does not verify",
    ],
  ])(
    "%s is denied with its reason on the request, nothing issued",
    async (_, proof, reason, says) => {
      const { machine, keyPem: oldKeyPem } = await joinedBeforeRotation("denied");
      const keyPem = newKey();
      const annotations = proofOf(proof, machine, keyPem, oldKeyPem);
      const csr = await fileUntil(machine, keyPem, annotations, reason);
      const s = await readCsr(csr);
      expect(s.conditions.map((c) => `${c.type}: ${c.reason}`)).toEqual([`Denied: ${reason}`]);
      const denied = s.conditions.find((c) => c.type === "Denied");
      expect(denied?.message).toContain(says);
      expect(s.conditions.map((c) => c.type)).not.toContain("Approved");
      expect(s.certificate ?? "").toBe("");
      await waitFor(`the approver's Warning Event ${reason}`, async () =>
        (await csrEventReasons(csr)).includes(`CertificateRequest${reason}`),
      );
    },
    120_000,
  );

  it("while a person's liken.sh/rejoin marker is on the Machine, a valid proof is left for a person", async () => {
    const { machine, keyPem: oldKeyPem } = await joinedBeforeRotation("marked");
    // Before the rotation, the command docs/machine.md gives a person whose machine's key leaked.
    const marked = await kubectl(["annotate", "machine", machine, "liken.sh/rejoin=manual"]);
    expect(marked.stderr).toBe("");
    expect(marked.code).toBe(0);
    // Whoever holds the machine's identity (its key leaked) cannot take the marker off: RBAC
    // refuses a write of the Machine itself, and a write of its status keeps metadata as it was.
    const { kubeconfig: leaked } = mintClientCert({
      user: `liken:machine:${machine}`,
      groups: ["liken:machines"],
    });
    const off = await kubectl(["annotate", "machine", machine, "liken.sh/rejoin-"], {
      kubeconfig: leaked,
    });
    expect(off.code).not.toBe(0);
    expect(off.stderr).toContain(
      `User "liken:machine:${machine}" cannot patch resource "machines"`,
    );
    const gone = await kubectl(["delete", "machine", machine], { kubeconfig: leaked });
    expect(gone.stderr).toContain(`cannot delete resource "machines"`);
    // A write of its status (what an agent may do) with the marker left out of metadata.
    const agent = LikenApi.fromKubeconfig(leaked, "liken-agent");
    const seen = await agent.machines.get(machine);
    const { "liken.sh/rejoin": _, ...others } = seen.metadata.annotations ?? {};
    const written = await agent.machines.replaceStatus({
      ...seen,
      metadata: { ...seen.metadata, annotations: others },
    });
    expect(written.metadata.annotations?.["liken.sh/rejoin"]).toBe("manual");
    expect((await api.machines.get(machine)).metadata.annotations?.["liken.sh/rejoin"]).toBe(
      "manual",
    );
    // After the rotation: a proof that holds in every way (the key the Machine reports, fresh,
    // this request), as the key's holder or the machine itself would file it.
    const keyPem = newKey();
    const annotations = rejoinAnnotations(machine, keyPem, oldKeyPem, new Date());
    const csr = await fileUntil(machine, keyPem, annotations, "RejoinLeftForPerson");
    const s = await readCsr(csr);
    expect(s.conditions.map((c) => `${c.type}: ${c.reason}`)).toEqual([]);
    expect(s.certificate ?? "").toBe("");
    const events = await eventsWhere(`involvedObject.name=${csr}`);
    const said = events.find((e) => e.reason === "CertificateRequestRejoinLeftForPerson")?.message;
    expect(said).toContain("left for a person");
    expect(said).toContain(`kubectl annotate machine ${machine} liken.sh/rejoin-`);
    // The person approves by hand; the signer issues.
    const approve = await kubectl(["certificate", "approve", csr]);
    expect(approve.code).toBe(0);
    const issued = await waitFor("the certificate a person approved", async () => {
      const now = await readCsr(csr);
      return (now.certificate ?? "") !== "" ? now : undefined;
    });
    expect(issued.conditions.map((c) => c.type)).toEqual(["Approved"]);
  }, 120_000);
});
