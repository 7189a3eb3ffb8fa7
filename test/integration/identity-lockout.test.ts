// A machine whose certificate expires while its renewal waits for approval rejoins by itself
// (docs/machine.md, "Identity"). On a real control plane of this file's own, whose signer
// issues 30 s certificates (test/support/short-certificates.ts; the tier's issue 90 s, and
// this test waits for one to expire): the machine joins (the real approver, as cluster-operator's ServiceAccount),
// then the approver stops (an operator down) while the renewal is filed and waits; the
// certificate expires; the agent stops asking with it and falls back to the bootstrap
// credential, which finds the same request; the approver comes back and approves it; the agent
// reads that approval, proves the certificate and switches its client to it, all without a
// restart.
import { CoreV1Api } from "@kubernetes/client-node";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { authenticatedUser } from "../../src/api/self-review.js";
import { tempDir } from "../support/temp-dir.js";
import { loadRestConfig, Rest } from "../../src/api/rest.js";
import { CsrApprover } from "../../src/operator/identity/approver.js";
import {
  bootstrapToken,
  capturedLog,
  installIdentityRbac,
  machineIdentity,
  startApprover,
} from "../support/identity.js";
import { kubeConfig, uniqueName, waitFor } from "../support/kube.js";
import {
  shortCertificateControlPlane,
  type ShortCertificates,
} from "../support/short-certificates.js";

const LABEL = "liken.sh/test-lockout";
/** The certificates' lifetime here: the renewal is filed at 21-27 s, the expiry at 30 s. */
const LIFETIME_SECONDS = 30;
const stop = new AbortController();
const approvers: CsrApprover[] = [];
let nodeName: string | undefined;
let plane: ShortCertificates | undefined;
beforeAll(async () => {
  plane = await shortCertificateControlPlane(LIFETIME_SECONDS, "lockout");
}, 120_000);
afterAll(async () => {
  stop.abort();
  for (const a of approvers) await a.stop();
  if (nodeName !== undefined)
    await kubeConfig()
      .makeApiClient(CoreV1Api)
      .deleteNode({ name: nodeName })
      .catch(() => undefined);
  await plane?.stop();
}, 60_000);

async function approver(): Promise<CsrApprover> {
  const a = await startApprover("identity-lockout-test", `${LABEL}=true`);
  approvers.push(a);
  return a;
}

describe("a machine locked out while its renewal waits", () => {
  it("falls back to the bootstrap credential and reads the approval that comes later", async () => {
    await installIdentityRbac();
    const { kubeconfig: bootstrap } = await bootstrapToken();
    const machine = uniqueName("lockout");
    nodeName = machine;
    await kubeConfig()
      .makeApiClient(CoreV1Api)
      .createNode({ body: { metadata: { name: machine, labels: { [LABEL]: "true" } } } });
    const { log, lines } = capturedLog();
    const dir = tempDir("liken-lockout-");
    const kubeconfig = path.join(dir, "kubeconfig");
    const identity = machineIdentity(machine, kubeconfig, bootstrap, log);
    const first = await approver();
    await identity.ensure(stop.signal);
    const rest = new Rest(loadRestConfig(kubeconfig), "liken-test");
    expect(await authenticatedUser(rest)).toBe(`liken:machine:${machine}`);
    const joinedUntil = Date.parse(identity.status(Date.now())!.certificateExpiry);
    // The signer's lifetime, not the one asked (3600 s): the expiry below is a real one.
    expect(joinedUntil - Date.now()).toBeLessThanOrEqual(LIFETIME_SECONDS * 1000);

    // The operator goes down: nothing approves the renewal the agent files at 70-90 %.
    await first.stop();
    let changes = 0;
    const renewing = identity.renewLoop(rest, stop.signal, () => changes++);
    await waitFor(
      "the renewal filed with the machine's own certificate",
      async () => lines.some((l) => l.includes('"phase":"renew"')),
      { timeoutMs: 120_000 },
    );
    await waitFor("the certificate expired", async () => Date.now() > joinedUntil + 2_000, {
      timeoutMs: 120_000,
      intervalMs: 1_000,
    });
    // It stopped asking with the expired certificate and asks with the bootstrap credential.
    await waitFor(
      "the fallback to the bootstrap credential",
      async () => lines.some((l) => l.includes('"phase":"rejoin"')),
      { timeoutMs: 60_000 },
    );
    expect(lines.join("")).toContain("LIKEN_AGENT_IDENTITY_EXPIRED");
    expect(changes).toBe(0);

    // The operator comes back: the waiting request is approved, and the agent takes it.
    await approver();
    await waitFor("the machine back with a certificate of its own", async () => changes > 0, {
      timeoutMs: 120_000,
    });
    const now = Date.now();
    const s = identity.status(now)!;
    expect(Date.parse(s.certificateExpiry)).toBeGreaterThan(now);
    expect(s.condition).toMatchObject({ status: "True", reason: "Rejoined" });
    expect(await authenticatedUser(rest)).toBe(`liken:machine:${machine}`);
    stop.abort();
    await renewing;
  }, 400_000);
});
