// The CSR approver's decision, table by table: a request is approved only when it is exactly
// what a liken agent files for itself; each refusal of docs/operator.md ("Machine
// certificates") has a row that fails when its check is removed.
import { describe, expect, it } from "vitest";
import {
  decideCsr,
  FLOOD_MAX,
  FLOOD_WINDOW_MS,
  type CsrView,
  type CsrWorld,
  type RequestFacts,
} from "../../src/operator/identity/decide.js";
import { carries } from "../../src/operator/identity/approver.js";

const NOW = Date.parse("2026-12-04T10:00:00Z");
const REQUEST: RequestFacts = {
  commonName: "liken:machine:m1",
  organizations: ["liken:machines"],
  otherSubject: [],
  alternativeNames: 0,
  key: { kind: "ec", curve: "prime256v1" },
};
const BOOTSTRAP = {
  username: "system:bootstrap:abcdef",
  groups: ["system:bootstrappers", "system:bootstrappers:liken", "system:authenticated"],
};
const ITSELF = { username: "liken:machine:m1", groups: ["liken:machines", "system:authenticated"] };

function csr(over: Partial<CsrView> = {}, request: Partial<RequestFacts> = {}): CsrView {
  return {
    name: "liken-m1-a",
    createdMs: NOW - 1000,
    signerName: "kubernetes.io/kube-apiserver-client",
    usages: ["client auth"],
    ...BOOTSTRAP,
    state: "Pending",
    request: { ...REQUEST, ...request },
    ...over,
  };
}

function world(over: Partial<CsrWorld> = {}): CsrWorld {
  return {
    nowMs: NOW,
    target: { node: true, nodeLabelled: false, machine: true },
    all: [],
    autoApprove: true,
    ...over,
  };
}

describe("decideCsr approves what an agent files for itself", () => {
  it.each<[string, CsrView, CsrWorld]>([
    [
      "bootstrap, a Node of that name carrying the operator's label",
      csr(),
      world({
        target: { node: true, nodeLabelled: true, machine: false },
        nodeLabel: "liken.sh/machine=true",
      }),
    ],
    [
      "bootstrap, only a Machine created ahead",
      csr(),
      world({ target: { node: false, nodeLabelled: false, machine: true } }),
    ],
    [
      "renewal by itself",
      csr(ITSELF),
      world({
        target: {
          node: true,
          nodeLabelled: false,
          machine: true,
          certificateExpiryMs: NOW + 60_000,
        },
      }),
    ],
    [
      "bootstrap after the certificate expired",
      csr(),
      world({
        target: { node: true, nodeLabelled: false, machine: true, certificateExpiryMs: NOW - 1 },
      }),
    ],
    ["RSA 2048", csr({}, { key: { kind: "rsa", bits: 2048 } }), world()],
    ["P-384", csr({}, { key: { kind: "ec", curve: "secp384r1" } }), world()],
    ["Ed25519", csr({}, { key: { kind: "ed25519" } }), world()],
    [
      "the old request of that name already issued and expired",
      csr(),
      world({ all: [csr({ name: "old", state: "Approved", issuedNotAfterMs: NOW - 5 })] }),
    ],
  ])("%s", (_, c, w) => {
    expect(decideCsr(c, w)).toMatchObject({ kind: "approve", machine: "m1" });
  });
});

describe("decideCsr refuses, and says why", () => {
  it.each<[string, CsrView, CsrWorld, "deny" | "leave", string]>([
    [
      "a wrong signer",
      csr({ signerName: "kubernetes.io/kubelet-serving" }),
      world(),
      "leave",
      "WrongSigner",
    ],
    [
      "extra usages",
      csr({ usages: ["client auth", "server auth"] }),
      world(),
      "deny",
      "WrongUsages",
    ],
    [
      "digital signature added",
      csr({ usages: ["digital signature", "client auth"] }),
      world(),
      "deny",
      "WrongUsages",
    ],
    ["no client auth", csr({ usages: ["server auth"] }), world(), "deny", "WrongUsages"],
    ["RSA 1024", csr({}, { key: { kind: "rsa", bits: 1024 } }), world(), "deny", "WeakKey"],
    ["P-224", csr({}, { key: { kind: "ec", curve: "secp224r1" } }), world(), "deny", "WeakKey"],
    ["a DSA key", csr({}, { key: { kind: "other", name: "dsa" } }), world(), "deny", "WeakKey"],
    [
      "a second organization",
      csr({}, { organizations: ["liken:machines", "system:masters"] }),
      world(),
      "deny",
      "WrongSubject",
    ],
    ["no organization", csr({}, { organizations: [] }), world(), "deny", "WrongSubject"],
    ["an OU", csr({}, { otherSubject: ["OU"] }), world(), "deny", "WrongSubject"],
    ["alternative names", csr({}, { alternativeNames: 1 }), world(), "deny", "WrongSubject"],
    [
      "a CN that names no machine",
      csr({}, { commonName: "liken:machine:" }),
      world(),
      "deny",
      "WrongSubject",
    ],
    [
      "a CN not a DNS name",
      csr({}, { commonName: "liken:machine:M_1" }),
      world(),
      "deny",
      "WrongSubject",
    ],
    [
      "O liken:machines but another CN",
      csr({}, { commonName: "admin" }),
      world(),
      "deny",
      "WrongSubject",
    ],
    [
      "another machine's name",
      csr({ username: "liken:machine:m2", groups: ["liken:machines"] }),
      world(),
      "deny",
      "OtherMachine",
    ],
    [
      "its own name without the group",
      csr({ username: "liken:machine:m1", groups: [] }),
      world(),
      "deny",
      "OtherMachine",
    ],
    [
      "an unknown requester",
      csr({ username: "alice", groups: ["system:authenticated"] }),
      world(),
      "leave",
      "UnknownRequester",
    ],
    [
      "bootstrap, no Node and no Machine",
      csr(),
      world({ target: { node: false, nodeLabelled: false, machine: false } }),
      "deny",
      "NoSuchMachine",
    ],
    [
      "bootstrap, a Node without the operator's label and no Machine (a control-plane node)",
      csr({}, { commonName: "liken:machine:control-plane-1" }),
      world({
        target: { node: true, nodeLabelled: false, machine: false },
        nodeLabel: "liken.sh/machine=true",
      }),
      "deny",
      "UnexpectedNode",
    ],
    [
      "bootstrap, a Node and no label configured",
      csr(),
      world({ target: { node: true, nodeLabelled: false, machine: false } }),
      "deny",
      "UnexpectedNode",
    ],
    [
      "a renewal for a name whose Node and Machine are gone",
      csr(ITSELF),
      world({ target: { node: false, nodeLabelled: false, machine: false } }),
      "leave",
      "NoSuchMachine",
    ],
    [
      "bootstrap while the Machine's certificate is valid",
      csr(),
      world({
        target: { node: true, nodeLabelled: false, machine: true, certificateExpiryMs: NOW + 1 },
      }),
      "leave",
      "AlreadyJoined",
    ],
    [
      "bootstrap while an issued certificate is valid",
      csr(),
      world({ all: [csr({ name: "first", state: "Approved", issuedNotAfterMs: NOW + 1 })] }),
      "leave",
      "AlreadyJoined",
    ],
    [
      "another pending request for the name",
      csr(),
      world({ all: [csr({ name: "other", username: "system:bootstrap:zzzzzz" })] }),
      "leave",
      "AlreadyPending",
    ],
    ["auto-approval off", csr(), world({ autoApprove: false }), "leave", "AutoApprovalOff"],
    [
      "an unreadable request",
      csr({ request: { unreadable: "Too big integer" } }),
      world(),
      "deny",
      "Unreadable",
    ],
  ])("%s", (_, c, w, kind, reason) => {
    expect(decideCsr(c, w)).toMatchObject({ kind, reason });
  });

  it(`a flood: the request after ${FLOOD_MAX} from one identity for one name within ${FLOOD_WINDOW_MS / 1000} s is denied`, () => {
    const all = Array.from({ length: FLOOD_MAX + 1 }, (_, i) =>
      csr({
        ...ITSELF,
        name: `r${i}`,
        createdMs: NOW - 10_000 + i,
        state: i < FLOOD_MAX ? "Approved" : "Pending",
      }),
    );
    const last = all[FLOOD_MAX]!;
    expect(decideCsr(last, world({ all }))).toMatchObject({ kind: "deny", reason: "RequestFlood" });
    // The same requests spread beyond the window are renewals, not a flood.
    const spread = all.map((c, i) => ({
      ...c,
      createdMs: NOW - (FLOOD_MAX - i) * (FLOOD_WINDOW_MS + 1),
    }));
    const later = { ...last, createdMs: NOW };
    expect(
      decideCsr(later, world({ all: spread.slice(0, FLOOD_MAX).concat(later) })),
    ).toMatchObject({ kind: "approve" });
  });
});

describe("decideCsr approves only names the fleet expects", () => {
  it("says which name, why, and what a person can do", () => {
    const d = decideCsr(
      csr({}, { commonName: "liken:machine:control-plane-1" }),
      world({
        target: { node: true, nodeLabelled: false, machine: false },
        nodeLabel: "liken.sh/machine=true",
      }),
    );
    expect(d).toMatchObject({ kind: "deny", reason: "UnexpectedNode" });
    const m = (d as { message: string }).message;
    expect(m).toContain("control-plane-1");
    expect(m).toContain("does not carry liken.sh/machine=true");
    expect(m).toContain("create the Machine control-plane-1 ahead");
    expect(m).toContain("or label its Node liken.sh/machine=true");
  });

  it.each<[string, Record<string, string>, string | undefined, boolean]>([
    ["no label configured", { "liken.sh/machine": "true" }, undefined, false],
    ["key=value, carried", { "liken.sh/machine": "true" }, "liken.sh/machine=true", true],
    ["key=value, another value", { "liken.sh/machine": "false" }, "liken.sh/machine=true", false],
    ["key alone, present", { "liken.sh/machine": "" }, "liken.sh/machine", true],
    [
      "key alone, absent",
      { "node-role.kubernetes.io/control-plane": "" },
      "liken.sh/machine",
      false,
    ],
  ])("a Node's labels and --csr-node-label: %s", (_, labels, selector, want) => {
    expect(carries(labels, selector)).toBe(want);
  });
});

describe("decideCsr leaves what is not liken's alone", () => {
  it.each<[string, CsrView]>([
    [
      "a kubelet's request",
      csr(
        { username: "system:node:n1", groups: ["system:nodes"] },
        { commonName: "system:node:n1", organizations: ["system:nodes"] },
      ),
    ],
    ["already approved", csr({ state: "Approved" })],
    ["denied", csr({ state: "Denied" })],
  ])("%s", (_, c) => {
    expect(decideCsr(c, world())).toEqual({ kind: "ignore" });
  });
});
