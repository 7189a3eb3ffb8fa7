// A machine whose certificate is still valid but no longer accepted (the cluster's client CA
// rotated, the certificate revoked) joins again with the bootstrap credential by itself
// (docs/machine.md, "Identity"; issue 38, 2.7). On the real control plane: the machine's
// current certificate is signed by a CA the API server does not trust (made here with openssl),
// valid for a day, so nothing about its dates asks for a renewal. The agent's client gets 401
// for each request; after a few of them over some seconds the agent says so with a stable code
// and files a request with the bootstrap credential; the real approver (as cluster-operator's
// ServiceAccount) approves it, the agent proves the new certificate and switches its client to
// it, all without a restart.
import { CoreV1Api } from "@kubernetes/client-node";
import { afterAll, describe, expect, it } from "vitest";
import { authenticatedUser } from "../../src/api/self-review.js";
import { tempDir } from "../support/temp-dir.js";
import { loadRestConfig, Rest } from "../../src/api/rest.js";
import { isUnauthorized } from "../../src/api/errors.js";
import { CsrApprover } from "../../src/operator/identity/approver.js";
import {
  bootstrapToken,
  capturedLog,
  installedIdentity,
  installIdentityRbac,
  machineIdentity,
  startApprover,
  untilAcceptedAs,
  untrustedCertificate,
} from "../support/identity.js";
import { kubeConfig, uniqueName } from "../support/kube.js";

const LABEL = "liken.sh/test-unaccepted";
const stop = new AbortController();
const approvers: CsrApprover[] = [];
let nodeName: string | undefined;
afterAll(async () => {
  stop.abort();
  for (const a of approvers) await a.stop();
  if (nodeName !== undefined)
    await kubeConfig()
      .makeApiClient(CoreV1Api)
      .deleteNode({ name: nodeName })
      .catch(() => undefined);
});

describe("a machine whose valid certificate the API server no longer accepts", () => {
  it("notices the 401s and joins again with the bootstrap credential, without a restart", async () => {
    await installIdentityRbac();
    const { kubeconfig: bootstrap } = await bootstrapToken();
    const machine = uniqueName("unaccepted");
    nodeName = machine;
    await kubeConfig()
      .makeApiClient(CoreV1Api)
      .createNode({ body: { metadata: { name: machine, labels: { [LABEL]: "true" } } } });
    approvers.push(await startApprover("identity-unaccepted-test", `${LABEL}=true`));
    const { log, lines } = capturedLog();
    // The machine's identity as the agent keeps it, its certificate from the CA before the
    // rotation: valid for a day, but no longer one the API server trusts.
    const dir = tempDir("liken-unaccepted-");
    const user = `liken:machine:${machine}`;
    const old = untrustedCertificate(tempDir("liken-rogue-ca-"), user);
    const kubeconfig = installedIdentity(dir, user, old);
    const identity = machineIdentity(machine, kubeconfig, bootstrap, log);
    // The agent starts: its certificate is valid by its dates, so it is used as it is.
    await identity.ensure(stop.signal);
    expect(lines.join("")).not.toContain('"phase":"rejoin"');
    const rest = new Rest(loadRestConfig(kubeconfig), "liken-test");
    const refused = await authenticatedUser(rest).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(isUnauthorized(refused)).toBe(true);

    let changes = 0;
    const renewing = identity.renewLoop(rest, stop.signal, () => changes++);
    // The agent's own requests go on (a heartbeat a second here), each refused until it rejoined.
    await untilAcceptedAs(rest, user, () => changes > 0);
    const said = lines.join("");
    expect(said).toContain("LIKEN_AGENT_IDENTITY_NOT_ACCEPTED");
    expect(said).toContain("is not accepted by the API server");
    expect(said).toContain('"phase":"rejoin"');
    // One rejoin, not one per refused answer (refusals.ts bounds them).
    expect(said.split("LIKEN_AGENT_IDENTITY_NOT_ACCEPTED").length - 1).toBe(1);
    const s = identity.status(Date.now())!;
    expect(s.condition).toMatchObject({ status: "True", reason: "Rejoined" });
    expect(await authenticatedUser(rest)).toBe(user);
    stop.abort();
    await renewing;
  }, 300_000);
});
