// A real rotation of the cluster's client CA under a RUNNING agent
// (docs/adr/rejoin-after-ca-rotation.md). On a control plane of this file's own whose client
// CA lives in files of its own (src/controlplane/certs.ts, rotatableClientCa): the machine joins
// with the bootstrap credential (the real `liken agent run`, approved by the real `liken
// operator`), reports its key's digest, and keeps running; then the files are replaced, as a
// person rotating the CA does: kube-apiserver reloads its --client-ca-file and the controller
// manager its signing CA, both without a restart (k8s.io/apiserver dynamiccertificates). The
// agent's in-date certificate is from then on answered 401; the agent, never restarted, must
// notice by its own answers (src/agent/identity/refusals.ts), join again with the bootstrap
// credential, prove by its old key that it is the same machine, be approved as a rejoin, and
// run on a certificate of the new CA. Before the rotation, the order docs/machine.md gives a
// person shutting a leaked key out is checked too: a removed key digest is written back by the
// agent while its certificate is accepted.
import { X509Certificate } from "node:crypto";
import { readFileSync } from "node:fs";
import path from "node:path";
import { CertificatesV1Api } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { authenticatedUser } from "../../src/api/self-review.js";
import { isUnauthorized } from "../../src/api/errors.js";
import { Rest } from "../../src/api/rest.js";
import type { Machine } from "../../src/api/types.js";
import { readHeld } from "../../src/agent/identity/files.js";
import { rotateClientCa } from "../../src/controlplane/certs.js";
import { bootstrapToken, csrEventReasons, installIdentityRbac } from "../support/identity.js";
import { controlPlane, kubeConfig, kubectl, uniqueName, waitFor } from "../support/kube.js";
import { ownControlPlane, type ShortCertificates } from "../support/short-certificates.js";
import { Fleet } from "./agent-harness.js";

const MACHINE = uniqueName("ca-live");
let plane: ShortCertificates | undefined;
let fleet: Fleet | undefined;

beforeAll(async () => {
  plane = await ownControlPlane("ca-live", { rotatableClientCa: true }, "rotates its client CA");
  await installIdentityRbac();
  const { kubeconfig: bootstrap } = await bootstrapToken();
  fleet = new Fleet();
  await fleet.start(["2026.10.10-001"]);
  await fleet.addMachine(
    { name: MACHINE, role: "Worker", rebootPolicy: "Auto" },
    {},
    undefined,
    bootstrap,
  );
  await fleet.startRealOperator();
  fleet.powerOnAll();
}, 240_000);

afterAll(async () => {
  await fleet?.stop();
  await plane?.stop();
}, 60_000);

/** Who the API server takes `pem` (certificate and key) for; throws its refusal (a 401). */
async function whoIs(pem: Buffer): Promise<string | undefined> {
  const cp = controlPlane();
  const rest = new Rest(
    { server: cp.server, ca: readFileSync(cp.serverCaCert), cert: pem, key: pem },
    "liken-test",
  );
  return authenticatedUser(rest);
}

function identityOf(m: Machine): { digest?: string; reason?: string; status?: string } {
  const c = m.status?.conditions?.find((x) => x.type === "IdentityCurrent");
  return {
    ...(m.status?.certificateKeyDigest === undefined
      ? {}
      : { digest: m.status.certificateKeyDigest }),
    ...(c === undefined ? {} : { reason: c.reason, status: c.status }),
  };
}

describe("the cluster's client CA rotates under a running agent", () => {
  it("the agent sees its in-date certificate refused and rejoins by its old key, never restarted", async () => {
    const f = fleet!;
    const sim = f.machines.get(MACHINE)!;
    const user = `liken:machine:${MACHINE}`;
    const joined = await waitFor(
      `${MACHINE} joined and reports its key digest`,
      async () => {
        const id = identityOf(await f.api.machines.get(MACHINE));
        return id.digest !== undefined && id.status === "True" ? id : undefined;
      },
      { timeoutMs: 180_000, intervalMs: 500 },
    );
    const dir = path.dirname(sim.identityKubeconfig);
    const held = readHeld(dir)!;
    expect(held.keyDigest).toBe(joined.digest);
    const oldPem = readFileSync(held.file);
    expect(await whoIs(oldPem)).toBe(user);
    const pid = sim.agentPid;
    expect(pid).toBeDefined();

    // Why a person's mark is on the Machine's metadata (liken.sh/rejoin, docs/machine.md), not
    // the removal of its key digest: before the rotation the agent, still accepted, writes the
    // digest back.
    const removed = await kubectl([
      "patch",
      "machine",
      MACHINE,
      "--subresource=status",
      "--type=json",
      "-p",
      '[{"op":"remove","path":"/status/certificateKeyDigest"}]',
    ]);
    expect(removed.code, removed.stderr).toBe(0);
    await waitFor(
      "the agent writing its key digest back",
      async () => identityOf(await f.api.machines.get(MACHINE)).digest === held.keyDigest,
      { timeoutMs: 60_000, intervalMs: 250 },
    );

    // The rotation: the API server trusts a new CA alone, and the signer issues with it.
    const rotatedAt = Date.now();
    const newCa = new X509Certificate(
      rotateClientCa(plane!.state.clientCa!, `liken-rotated-${MACHINE}`),
    );
    const refusedAfterMs = await waitFor(
      "the API server refusing the old certificate (401)",
      async () =>
        whoIs(oldPem).then(
          () => undefined,
          (e: unknown) => (isUnauthorized(e) ? Date.now() - rotatedAt : undefined),
        ),
      { timeoutMs: 60_000, intervalMs: 250 },
    );
    const back = await waitFor(
      `${MACHINE} back on a new key, IdentityCurrent Rejoined`,
      async () => {
        const id = identityOf(await f.api.machines.get(MACHINE));
        if (id.digest !== undefined && id.digest !== held.keyDigest && id.reason === "Rejoined")
          return id;
        // What the deadline's message names.
        throw new Error(`the Machine reports key ${id.digest} (${id.status}, ${id.reason})`);
      },
      // 16 s on a quiet machine: the agent's 3 refusals over 10 s, the approver's 2 s.
      { timeoutMs: 120_000, intervalMs: 500 },
    );
    const rejoinedAfterMs = Date.now() - rotatedAt;
    console.log(
      `liken: ${MACHINE} refused ${(refusedAfterMs / 1000).toFixed(1)} s after the rotation, rejoined after ${(rejoinedAfterMs / 1000).toFixed(1)} s`,
    );

    // The same agent process all along: its own 401s made it rejoin, not a restart.
    expect(sim.agentPid).toBe(pid);
    const log = readFileSync(sim.logFile, "utf8");
    expect(log).toContain("LIKEN_AGENT_IDENTITY_NOT_ACCEPTED");
    // Its new certificate: the key it now reports, issued by the new CA, accepted as itself.
    const now = readHeld(dir)!;
    expect(now.keyDigest).toBe(back.digest);
    const nowPem = readFileSync(now.file);
    expect(new X509Certificate(nowPem).checkIssued(newCa)).toBe(true);
    expect(await whoIs(nowPem)).toBe(user);
    // Approved by the real operator as a rejoin proven by the old key, without a person.
    const csrs = await kubeConfig()
      .makeApiClient(CertificatesV1Api)
      .listCertificateSigningRequest();
    const mine = csrs.items
      .map((c) => c.metadata?.name ?? "")
      .filter((n) => n.startsWith(`liken-${MACHINE}-`));
    const rejoined: string[] = [];
    for (const name of mine) {
      if ((await csrEventReasons(name)).includes("CertificateRequestRejoined")) rejoined.push(name);
    }
    expect(rejoined).toHaveLength(1);
  }, 420_000);
});
