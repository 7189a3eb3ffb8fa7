// Who may write what, enforced by the API server: the install command, then real
// identities (client certificates signed by the cluster's CA, a ServiceAccount token)
// going through authentication, RBAC and the liken-machine-restriction admission policy.
// No impersonation: an impersonated request would prove nothing about a stolen certificate.
import { fileURLToPath } from "node:url";
import { CoreV1Api, KubeConfig, PatchStrategy, setHeaderOptions } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HeartbeatClient, LikenApi, type ApiError, type Machine } from "../../src/api/index.js";
import { createCluster } from "../support/clusters.js";
import {
  kubeConfig,
  kubectl,
  mintClientCert,
  serviceAccountKubeConfig,
  uniqueName,
  waitFor,
} from "../support/kube.js";

const admin = new LikenApi(kubeConfig());
const cleanup: (() => Promise<unknown>)[] = [];

function machine(name: string, extra: Partial<Machine["spec"]> = {}): Machine {
  return {
    apiVersion: "liken.sh/v1alpha1",
    kind: "Machine",
    metadata: { name },
    spec: { cluster: "lab", nodeName: name, ...extra },
  };
}

/** A client of the liken API authenticated by a fresh certificate for this identity. */
function identity(user: string, groups: string[]): { api: LikenApi; kc: KubeConfig } {
  const { kubeconfig } = mintClientCert({ user, groups });
  const api = LikenApi.fromKubeconfig(kubeconfig, "liken-agent");
  return { api, kc: api.kubeConfig };
}

async function refused(p: Promise<unknown>): Promise<ApiError> {
  const e = (await p.then(
    () => undefined,
    (err: unknown) => err,
  )) as ApiError | undefined;
  expect(e, "the API server accepted a request it should refuse").toBeDefined();
  expect(e).toMatchObject({ code: "LIKEN_API_FORBIDDEN", httpStatus: 403 });
  return e!;
}

async function createNode(name: string): Promise<void> {
  const core = kubeConfig().makeApiClient(CoreV1Api);
  await core.createNode({ body: { metadata: { name } } });
  cleanup.push(() => core.deleteNode({ name }));
}

/** Widen RBAC for one user (so that a refusal can only come from the admission policy). */
async function grant(user: string, verbs: string, resources: string): Promise<void> {
  const name = uniqueName("widened");
  const role = await kubectl([
    "create",
    "clusterrole",
    name,
    `--verb=${verbs}`,
    `--resource=${resources}`,
  ]);
  expect(role.stderr).toBe("");
  cleanup.push(() => kubectl(["delete", "clusterrole", name]));
  const binding = await kubectl([
    "create",
    "clusterrolebinding",
    name,
    `--clusterrole=${name}`,
    `--user=${user}`,
  ]);
  expect(binding.stderr).toBe("");
  cleanup.push(() => kubectl(["delete", "clusterrolebinding", name]));
}

let clusterName: string;

beforeAll(async () => {
  // The README's one-command install.
  const install = await kubectl([
    "apply",
    "-k",
    fileURLToPath(new URL("../../config/", import.meta.url)),
  ]);
  expect(install.stderr).not.toMatch(/error/i);
  expect(install.code).toBe(0);
  expect(install.stdout).toMatch(
    /validatingadmissionpolicy\.admissionregistration\.k8s\.io\/liken-machine-restriction (created|configured|unchanged)/,
  );
  expect(install.stdout).toMatch(/clusterrole\.rbac\.authorization\.k8s\.io\/liken:agent /);

  clusterName = uniqueName("lab");
  await createCluster(admin, clusterName);
  cleanup.push(() => admin.clusters.delete(clusterName));

  // A new policy takes effect once the API server has loaded it: wait until it refuses.
  const probe = identity("liken:machine:probe", ["liken:machines"]).api;
  await waitFor("the admission policy to be in force", async () => {
    const e = await probe.machines.create(machine(uniqueName("not-probe")), { dryRun: true }).then(
      () => undefined,
      (err: unknown) => err as ApiError,
    );
    return e?.code === "LIKEN_API_FORBIDDEN";
  });
});

afterAll(async () => {
  for (const c of cleanup.reverse()) await c().catch(() => undefined);
});

describe("an agent (CN=liken:machine:<name>, O=liken:machines)", () => {
  it("creates and writes the status of its own Machine only", async () => {
    const self = uniqueName("node");
    const other = uniqueName("node");
    const agent = identity(`liken:machine:${self}`, ["liken:machines"]).api;

    const mine = await agent.machines.create(machine(self));
    cleanup.push(() => admin.machines.delete(self));
    mine.status = { step: "Downloading", version: "2026.10.10-001" };
    const written = await agent.machines.replaceStatus(mine);
    expect(written.status?.step).toBe("Downloading");

    const e = await refused(agent.machines.create(machine(other)));
    expect(e.message).toContain(
      `agent liken:machine:${self} may write only Machine ${self}, not Machine ${other}`,
    );

    await admin.machines.create(machine(other));
    cleanup.push(() => admin.machines.delete(other));
    const theirs = await agent.machines.get(other); // reading is allowed
    theirs.status = { step: "Lost" };
    const e2 = await refused(agent.machines.replaceStatus(theirs));
    expect(e2.message).toContain(`may write only Machine ${self}, not Machine ${other}`);
    const e3 = await refused(agent.machines.patchStatus(other, { status: { step: "Ready" } }));
    expect(e3.message).toContain(`not Machine ${other}`);
    expect((await admin.machines.get(other)).status).toBeUndefined();
  });

  it("may not change its own spec, approve itself, or delete its Machine", async () => {
    const self = uniqueName("node");
    const agent = identity(`liken:machine:${self}`, ["liken:machines"]).api;
    const approval = { version: "2026.10.10-001", by: "me", at: "2026-12-02T12:00:00Z" };

    const e1 = await refused(agent.machines.create(machine(self, { approval })));
    expect(e1.message).toContain("may create its Machine (without an approval)");
    // Its Machine names its own Node: the node it cordons, and the one its evictions follow.
    const e0 = await refused(agent.machines.create(machine(self, { nodeName: "elsewhere" })));
    expect(e0.message).toContain(
      `agent liken:machine:${self} may register Machine ${self} only for its own Node ${self}, not for Node elsewhere`,
    );

    await agent.machines.create(machine(self));
    cleanup.push(() => admin.machines.delete(self));
    // RBAC gives agents no write on the Machine itself...
    const e2 = await refused(agent.machines.patch(self, { spec: { rebootPolicy: "Auto" } }));
    expect(e2.message).toContain(`cannot patch resource "machines"`);
    await refused(agent.machines.delete(self));
    // ...and with RBAC widened for this identity, the policy still keeps the spec a person's.
    await grant(`liken:machine:${self}`, "update,patch,delete", "machines.liken.sh");
    const e3 = await waitFor("RBAC to let the request through to admission", async () => {
      const err = await refused(agent.machines.patch(self, { spec: { approval } }));
      return err.message.includes("the spec belongs to people") ? err : undefined;
    });
    expect(e3.message).toContain(`but not UPDATE machines ${self}: the spec belongs to people`);
    // Metadata too: a person's liken.sh/rejoin mark (docs/machine.md, "Identity") stays.
    await admin.machines.patch(self, {
      metadata: { annotations: { "liken.sh/rejoin": "manual" } },
    });
    const e5 = await refused(
      agent.machines.patch(self, { metadata: { annotations: { "liken.sh/rejoin": null } } }),
    );
    expect(e5.message).toContain(`but not UPDATE machines ${self}`);
    expect((await admin.machines.get(self)).metadata.annotations?.["liken.sh/rejoin"]).toBe(
      "manual",
    );
    const e4 = await refused(agent.machines.delete(self));
    expect(e4.message).toContain(`but not DELETE machines ${self}`);
    expect((await admin.machines.get(self)).spec).toMatchObject({ rebootPolicy: "Manual" });
    expect((await admin.machines.get(self)).spec.approval).toBeUndefined();
  });

  it("never writes a Cluster, even when RBAC would allow it", async () => {
    const self = uniqueName("node");
    const agent = identity(`liken:machine:${self}`, ["liken:machines"]).api;
    expect((await agent.clusters.get(clusterName)).spec.version).toBe("2026.10.10-001");
    await refused(
      agent.clusters.patch(clusterName, { spec: { disruption: { maxUnavailable: 5 } } }),
    );

    // Grant this one identity full rights on Clusters: the policy must still refuse.
    await grant(
      `liken:machine:${self}`,
      "get,update,patch",
      "clusters.liken.sh,clusters.liken.sh/status",
    );
    const e = await waitFor("RBAC to let the request through to admission", async () => {
      const err = await refused(
        agent.clusters.patch(clusterName, { spec: { disruption: { maxUnavailable: 5 } } }),
      );
      return err.message.includes("may not change a Cluster") ? err : undefined;
    });
    expect(e.message).toContain(
      `agent liken:machine:${self} may not change a Cluster (UPDATE clusters ${clusterName})`,
    );
    const e2 = await refused(
      agent.clusters.patchStatus(clusterName, { status: { rebootTurns: [] } }),
    );
    expect(e2.message).toContain(`UPDATE clusters/status ${clusterName}`);
    expect((await admin.clusters.get(clusterName)).spec.disruption?.maxUnavailable).toBe(1);
  });

  it("renews only its own heartbeat Lease", async () => {
    const self = uniqueName("node");
    const other = uniqueName("node");
    const { kc } = identity(`liken:machine:${self}`, ["liken:machines"]);
    const hb = new HeartbeatClient(kc);
    cleanup.push(() => kubectl(["-n", "liken-heartbeats", "delete", "lease", self]));
    const renewed = await hb.renew(self, clusterName);
    expect(renewed.machine).toBe(self);
    const e = await refused(hb.renew(other, clusterName));
    expect(e.message).toContain(
      `may write only its heartbeat Lease liken-heartbeats/${self}, not liken-heartbeats/${other}`,
    );
  });

  it("cordons only its own Node", async () => {
    const self = uniqueName("node");
    const other = uniqueName("node");
    await createNode(self);
    await createNode(other);
    const { kc } = identity(`liken:machine:${self}`, ["liken:machines"]);
    const core = kc.makeApiClient(CoreV1Api);
    // A merge patch, as the drain cordons (RBAC gives agents patch on nodes, not update).
    const cordon = (name: string): Promise<unknown> =>
      core.patchNode(
        { name, body: { spec: { unschedulable: true } } },
        setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
      );
    await cordon(self);
    expect(
      (await kubeConfig().makeApiClient(CoreV1Api).readNode({ name: self })).spec?.unschedulable,
    ).toBe(true);
    const err = await cordon(other).then(
      () => undefined,
      (e: unknown) => e as { code?: number; body?: string },
    );
    expect(err?.code).toBe(403);
    expect(err?.body).toContain(`may update only Node ${self} (its own), not UPDATE Node ${other}`);
  });

  it("a member of liken:machines not named liken:machine:<name> may write nothing", async () => {
    const agent = identity("bob", ["liken:machines"]).api;
    const e = await refused(agent.machines.create(machine("bob")));
    expect(e.message).toContain(
      "user bob is in group liken:machines but is not named liken:machine:<machine>",
    );
  });
});

describe("the other roles", () => {
  it("a reboot approver may approve a Machine but not retarget the Cluster", async () => {
    const alice = uniqueName("alice");
    const binding = await kubectl([
      "create",
      "clusterrolebinding",
      alice,
      "--clusterrole=liken:reboot-approver",
      `--user=${alice}`,
    ]);
    expect(binding.code).toBe(0);
    cleanup.push(() => kubectl(["delete", "clusterrolebinding", alice]));
    const name = uniqueName("node");
    await admin.machines.create(machine(name));
    cleanup.push(() => admin.machines.delete(name));

    const person = identity(alice, []).api;
    const approval = { version: "2026.10.10-001", by: alice, at: "2026-12-02T12:00:00Z" };
    const approved = await waitFor("RBAC to let alice approve", () =>
      person.machines.patch(name, { spec: { approval } }).catch(() => undefined),
    );
    expect(approved.spec.approval).toEqual(approval);
    await refused(person.clusters.patch(clusterName, { spec: { version: null } }));
  });

  it("cluster-operator's ServiceAccount writes Cluster status, not spec", async () => {
    const kc = await serviceAccountKubeConfig("liken-system", "cluster-operator");
    const operator = new LikenApi(kc, "cluster-operator");
    const c = await operator.clusters.get(clusterName);
    c.status = { phase: "Ready", machines: "0/0" };
    expect((await operator.clusters.replaceStatus(c)).status?.phase).toBe("Ready");
    await refused(operator.clusters.patch(clusterName, { spec: { version: null } }));
  });
});
