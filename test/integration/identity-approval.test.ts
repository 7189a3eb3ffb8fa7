// Machine certificates on the real control plane: the fleet's bootstrap token (a real
// bootstrap-token Secret, authenticated by kube-apiserver), cluster-operator's approver running
// as the operator's ServiceAccount (so its RBAC is what approves), and the controller
// manager's signer issuing what was approved. Every refusal of docs/operator.md ("Machine
// certificates") is filed for real and must end denied or left with its Event, with nothing
// issued.
import { CoreV1Api } from "@kubernetes/client-node";
import { X509Certificate } from "node:crypto";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadRestConfig, Rest } from "../../src/api/rest.js";
import { newKey, requestCertificate, requestName } from "../../src/agent/identity/request.js";
import { CsrApprover } from "../../src/operator/identity/approver.js";
import { FLOOD_MAX } from "../../src/operator/identity/decide.js";
import {
  bootstrapToken,
  csrEventReasons,
  fileRaw,
  installIdentityRbac,
  readCsr,
  startApprover,
} from "../support/identity.js";
import { kubeConfig, mintClientCert, uniqueName, waitFor } from "../support/kube.js";

const log = pino({ level: "warn" });
let approver: CsrApprover;
let bootstrap: string;
const nodes: string[] = [];

/** The label this approver is told marks the fleet's Nodes (--csr-node-label). */
const FLEET_LABEL = "liken.sh/test-fleet";

async function node(prefix: string, labelled = true): Promise<string> {
  const name = uniqueName(prefix);
  const labels = labelled ? { [FLEET_LABEL]: "true" } : undefined;
  await kubeConfig()
    .makeApiClient(CoreV1Api)
    .createNode({ body: { metadata: { name, ...(labels === undefined ? {} : { labels }) } } });
  nodes.push(name);
  return name;
}

const subject = (machine: string): string => `/CN=liken:machine:${machine}/O=liken:machines`;

/** Waits for the approver's word on `csr`: Denied with `reason`, or an Event with it. */
async function refused(csr: string, kind: "deny" | "leave", reason: string): Promise<void> {
  await waitFor(`${csr} ${kind === "deny" ? "denied" : "left"} with ${reason}`, async () => {
    const s = await readCsr(csr);
    if (kind === "deny")
      return s.conditions.some((c) => c.type === "Denied" && c.reason === reason);
    return (await csrEventReasons(csr)).includes(`CertificateRequest${reason}`);
  });
  const s = await readCsr(csr);
  expect(s.conditions.map((c) => c.type)).not.toContain("Approved");
  expect(s.certificate ?? "").toBe("");
}

beforeAll(async () => {
  await installIdentityRbac();
  bootstrap = (await bootstrapToken()).kubeconfig;
  approver = await startApprover("identity-approval-test", `${FLEET_LABEL}=true`);
});

afterAll(async () => {
  await approver?.stop();
  const core = kubeConfig().makeApiClient(CoreV1Api);
  for (const name of nodes) await core.deleteNode({ name }).catch(() => undefined);
});

describe("a machine joins with the bootstrap token", () => {
  let machine: string;

  it("gets a certificate of its own, issued by the signer once approved", async () => {
    machine = await node("join");
    const rest = new Rest(loadRestConfig(bootstrap), "liken-test");
    const keyPem = newKey();
    const pem = await requestCertificate(rest, {
      machine,
      keyPem,
      expirationSeconds: 3600,
      warnAfterMs: 60_000,
      log,
      signal: AbortSignal.timeout(60_000),
    });
    const cert = new X509Certificate(pem);
    // Go's signer writes the subject in its own order (O before CN).
    expect(cert.subject.split("\n").sort()).toEqual([
      `CN=liken:machine:${machine}`,
      "O=liken:machines",
    ]);
    expect(cert.checkPrivateKey((await import("node:crypto")).createPrivateKey(keyPem))).toBe(true);
    const s = await readCsr(requestName(machine, keyPem));
    expect(s.conditions).toContainEqual(
      expect.objectContaining({ type: "Approved", reason: "LikenMachineApproved" }),
    );
  });

  it("is refused the bootstrap token again while that certificate is valid (AlreadyJoined)", async () => {
    const csr = await fileRaw(bootstrap, { name: uniqueName("again"), subject: subject(machine) });
    await refused(csr, "leave", "AlreadyJoined");
  });
});

describe("each bad request is refused and nothing is issued", () => {
  it("another machine's name, asked by a machine's identity (OtherMachine)", async () => {
    const victim = await node("victim");
    const thief = mintClientCert({ user: "liken:machine:thief", groups: ["liken:machines"] });
    const csr = await fileRaw(thief.kubeconfig, {
      name: uniqueName("steal"),
      subject: subject(victim),
    });
    await refused(csr, "deny", "OtherMachine");
  });

  it("extra usages (WrongUsages)", async () => {
    const m = await node("usages");
    const csr = await fileRaw(bootstrap, {
      name: uniqueName("usages"),
      subject: subject(m),
      usages: ["client auth", "digital signature"],
    });
    await refused(csr, "deny", "WrongUsages");
  });

  it("a wrong signer (WrongSigner, left for a person)", async () => {
    const m = await node("signer");
    const csr = await fileRaw(bootstrap, {
      name: uniqueName("signer"),
      subject: subject(m),
      signerName: "example.com/machines",
    });
    await refused(csr, "leave", "WrongSigner");
  });

  it.each([
    ["RSA-1024", "rsa:1024"],
    ["P-224", "ec:P-224"],
  ])("a weak key, %s (WeakKey)", async (_, key) => {
    const m = await node("weak");
    const csr = await fileRaw(bootstrap, { name: uniqueName("weak"), subject: subject(m), key });
    await refused(csr, "deny", "WeakKey");
  });

  it("a subject with more than the machine's name (WrongSubject)", async () => {
    const m = await node("subject");
    const csr = await fileRaw(bootstrap, {
      name: uniqueName("subject"),
      // (system:masters the API server refuses by itself for this signer.)
      subject: `${subject(m)}/O=liken:admins`,
    });
    await refused(csr, "deny", "WrongSubject");
  });

  it("a name no Node and no Machine has (NoSuchMachine)", async () => {
    const csr = await fileRaw(bootstrap, {
      name: uniqueName("nosuch"),
      subject: subject(uniqueName("nobody")),
    });
    await refused(csr, "deny", "NoSuchMachine");
  });

  it("a Node the fleet does not expect: no Machine, not labelled (UnexpectedNode)", async () => {
    // What a control-plane node looks like to the approver: a Node, and nothing of liken's.
    const n = await node("cp", false);
    const csr = await fileRaw(bootstrap, { name: uniqueName("unexpected"), subject: subject(n) });
    await refused(csr, "deny", "UnexpectedNode");
    expect((await readCsr(csr)).conditions.find((c) => c.type === "Denied")?.message).toContain(
      `label its Node ${FLEET_LABEL}=true`,
    );
  });

  it(`a flood from one identity: the requests after ${FLOOD_MAX} within a minute (RequestFlood)`, async () => {
    const m = await node("flood");
    const self = mintClientCert({ user: `liken:machine:${m}`, groups: ["liken:machines"] });
    const names: string[] = [];
    for (let i = 0; i < FLOOD_MAX + 2; i++) {
      names.push(await fileRaw(self.kubeconfig, { name: `flood-${m}-${i}`, subject: subject(m) }));
    }
    for (const csr of names.slice(FLOOD_MAX)) await refused(csr, "deny", "RequestFlood");
  });
});
