// Who may evict which pod, enforced by the API server: the README's install (config/), the
// eviction webhook served by cluster-operator's code with cluster-operator's own
// ServiceAccount token, and a machine's own client certificate (CN=liken:machine:<name>,
// O=liken:machines) for every eviction. No impersonation: a refusal here is what a stolen
// machine certificate would meet.
import { fileURLToPath } from "node:url";
import { CoreV1Api, KubeConfig, type V1Pod } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LikenApi, type Cluster, type RebootTurn, type ReleaseRef } from "../../src/api/index.js";
import { freePort } from "../../src/controlplane/ports.js";
import { DrainError, drainNode, type DrainProgress } from "../../src/drain/index.js";
import { DrainApi, type EvictionOutcome } from "../../src/drain/kube.js";
import type { Logger } from "../../src/operator/logger.js";
import { EVICTION_PATH, EvictionWebhook } from "../../src/operator/webhook/index.js";
import { Fleet } from "./agent-harness.js";
import {
  apply,
  claimTemplateYaml,
  daemonSetYaml,
  deploymentYaml,
  devicesYaml,
  pdbYaml,
  recordNamespace,
  remove,
  waitBudget,
  waitReady,
} from "../support/drain-helpers.js";
import { violations } from "../support/drain-invariants.js";
import {
  createKwokNode,
  createNamespace,
  kubeConfig,
  kubectl,
  serviceAccountKubeConfig,
  mintClientCert,
  uniqueName,
  waitFor,
  deleteNamespaces,
} from "../support/kube.js";

// Registered first, so it runs last (afterAll hooks run in reverse): the namespaces this file
// made go once what ran in them has stopped.
afterAll(deleteNamespaces);

const admin = new LikenApi(kubeConfig());
const core = kubeConfig().makeApiClient(CoreV1Api);
const DIGEST = `sha256:${"a".repeat(64)}`;
const VERSION = "2026.10.10-001";
const cleanups: (() => Promise<unknown>)[] = [];
const logLines: string[] = [];
const say = (line: string): string => (process.stderr.write(`webhook: ${line}\n`), line);
const log: Logger = {
  info: (o, m) => void logLines.push(`info ${m} ${JSON.stringify(o)}`),
  // Warnings also to stderr: what the webhook met is what a failing run needs to show.
  warn: (o, m) => void logLines.push(say(`warn ${m} ${JSON.stringify(o)}`)),
  error: (o, m) => void logLines.push(say(`error ${m} ${JSON.stringify(o)}`)),
};

let cluster: string;
let operatorKc: KubeConfig;
let webhook: EvictionWebhook | undefined;
let webhookUrl: string;

/** The kubeconfig of a machine's agent: its own client certificate, nothing else. */
function agentKc(machine: string): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromFile(
    mintClientCert({ user: `liken:machine:${machine}`, groups: ["liken:machines"] }).kubeconfig,
  );
  return kc;
}

async function startWebhook(): Promise<void> {
  webhook = new EvictionWebhook(operatorKc, {
    listen: `127.0.0.1:${new URL(webhookUrl).port}`,
    url: webhookUrl,
    log,
  });
  webhook.start();
  await webhook.ready;
}

/** A kwok Node with a Machine named after it in the test's Cluster. */
async function machineOnNode(prefix: string, labels: Record<string, string> = {}) {
  const name = uniqueName(prefix);
  await createKwokNode(name, { labels });
  await admin.machines.create({
    apiVersion: "liken.sh/v1alpha1",
    kind: "Machine",
    metadata: { name },
    spec: { cluster, nodeName: name },
  });
  cleanups.push(
    () => admin.machines.delete(name),
    () => remove(["node", name]),
  );
  return name;
}

/** A bare pod bound to `node` (no scheduler), Running and Ready by kwok. */
async function podOn(ns: string, node: string): Promise<V1Pod> {
  const name = uniqueName("p");
  await core.createNamespacedPod({
    namespace: ns,
    body: {
      metadata: { name, labels: { app: name } },
      spec: {
        nodeName: node,
        terminationGracePeriodSeconds: 1,
        containers: [{ name: "main", image: "registry.example/app:1" }],
      },
    },
  });
  const [pod] = await waitReady(ns, name, 1, node);
  return pod!;
}

async function setTurns(machines: string[]): Promise<void> {
  await admin.clusters.updateStatus(cluster, (c) => {
    const turns: RebootTurn[] = machines.map((machine) => ({
      machine,
      grantedAt: new Date().toISOString().replace(/\.\d+Z$/, "Z"),
      grantedBy: "drain-restriction-test",
      leader: false,
      version: VERSION,
      digest: DIGEST,
    }));
    return { ...c, status: { ...c.status, rebootTurns: turns } };
  });
}

function evict(kc: KubeConfig, pod: V1Pod): Promise<EvictionOutcome> {
  return new DrainApi(kc).evict(pod.metadata!.namespace!, pod.metadata!.name!, pod.metadata!.uid!);
}

async function podExists(pod: V1Pod): Promise<boolean> {
  try {
    const p = await core.readNamespacedPod({
      name: pod.metadata!.name!,
      namespace: pod.metadata!.namespace!,
    });
    return p.metadata?.uid === pod.metadata?.uid && p.metadata?.deletionTimestamp == null;
  } catch {
    return false;
  }
}

beforeAll(async () => {
  // The README's one-command install: CRDs, RBAC, the policy, the webhook configuration.
  const install = await kubectl([
    "apply",
    "-k",
    fileURLToPath(new URL("../../config/", import.meta.url)),
  ]);
  expect(install.code, install.stderr).toBe(0);
  expect(install.stdout).toMatch(
    /validatingwebhookconfiguration\.admissionregistration\.k8s\.io\/liken-eviction-restriction /,
  );
  // cluster-operator's own identity (its ServiceAccount's token), so its RBAC is tested too.
  operatorKc = await serviceAccountKubeConfig("liken-system", "cluster-operator");
  // The API server runs on loopback: the URL switch (--webhook-url in `liken operator`).
  webhookUrl = `https://127.0.0.1:${await freePort()}${EVICTION_PATH}`;
  await startWebhook();

  cluster = uniqueName("evict");
  await admin.clusters.create({
    apiVersion: "liken.sh/v1alpha1",
    kind: "Cluster",
    metadata: { name: cluster },
    spec: {
      version: VERSION,
      releases: {
        source: "https://releases.liken.sh",
        catalog: [{ version: VERSION, digest: DIGEST }],
      },
    },
  } satisfies Cluster);
  cleanups.push(() => admin.clusters.delete(cluster));
});

afterAll(async () => {
  await webhook?.stop();
  for (const c of cleanups.reverse()) await c().catch(() => undefined);
});

describe("an agent's evictions (its own certificate, the webhook served by cluster-operator)", () => {
  let ns: string;
  let self: string;
  let other: string;
  let agent: KubeConfig;

  beforeAll(async () => {
    ns = await createNamespace("evict");
    cleanups.push(() => remove(["namespace", ns]));
    self = await machineOnNode("evict-a");
    other = await machineOnNode("evict-b");
    agent = agentKc(self);
    // The API server loads a changed webhook configuration within moments: wait until the
    // webhook (not the Service the install names, which nothing serves here) answers.
    const probe = await podOn(ns, other);
    await waitFor("the eviction webhook to be in force", async () => {
      const o = await evict(agent, probe);
      return o.kind === "failed" && o.message.includes("may evict only pods on its own node")
        ? o
        : undefined;
    });
  });

  it("refuses a pod on another node, naming who asked, the pod, both nodes and why", async () => {
    await setTurns([self]); // even with a turn
    const theirs = await podOn(ns, other);
    const o = await evict(agent, theirs);
    expect(o).toMatchObject({ kind: "failed", status: 403 });
    const message = (o as { message: string }).message;
    expect(message).toContain('admission webhook "eviction.liken.sh" denied the request');
    expect(message).toContain(
      `liken:machine:${self} may evict only pods on its own node ${self}, not pod ${ns}/${theirs.metadata!.name} on node ${other}`,
    );
    expect(await podExists(theirs)).toBe(true);
  });

  it("refuses a pod on its own node while its Machine holds no reboot turn", async () => {
    await setTurns([other]);
    const mine = await podOn(ns, self);
    const o = await evict(agent, mine);
    expect(o).toMatchObject({ kind: "failed", status: 403 });
    expect((o as { message: string }).message).toContain(
      `liken:machine:${self} may not evict pod ${ns}/${mine.metadata!.name} on node ${self}: Machine ${self} holds no reboot turn in Cluster ${cluster} (turns held: ${other})`,
    );
    expect(await podExists(mine)).toBe(true);
  });

  it("evicts a pod on its own node while its Machine holds a granted turn", async () => {
    const mine = await podOn(ns, self);
    await setTurns([self]);
    expect(await evict(agent, mine)).toEqual({ kind: "accepted" });
    await waitFor("the evicted pod to go", async () => !(await podExists(mine)));
    // A pod that is gone reads as gone (404), as the drain expects, not as a refusal.
    expect(await evict(agent, mine)).toEqual({ kind: "gone" });
    expect(logLines.some((l) => l.includes(`evicts pod ${ns}/${mine.metadata!.name}`))).toBe(true);
  });

  it("an agent named otherwise than liken:machine:<name> may evict nothing", async () => {
    const bob = new KubeConfig();
    bob.loadFromFile(mintClientCert({ user: "bob", groups: ["liken:machines"] }).kubeconfig);
    const mine = await podOn(ns, self);
    const o = await evict(bob, mine);
    expect(o).toMatchObject({ kind: "failed", status: 403 });
    expect((o as { message: string }).message).toContain(
      "user bob is in group liken:machines but is not named liken:machine:<machine>",
    );
  });
});

describe("the full drain on a granted turn, as the agent", () => {
  it("honours every budget and the DRA order, with the agent's narrowed rights", async () => {
    const ns = await createNamespace("evict-drain");
    const pool = { "liken-test/pool": ns };
    const driver = `${uniqueName("evict")}.example.com`;
    const cls = uniqueName("evict-dev");
    const node = await machineOnNode("evict-d", pool);
    cleanups.push(
      () => remove(["namespace", ns]),
      () => remove(["deviceclass", cls]),
      () => remove(["resourceslice", `${node}-${cls}`]),
    );
    await apply(devicesYaml(driver, cls, [node]) + "---\n" + claimTemplateYaml(ns, "dev", cls));
    const onNode = { "kubernetes.io/hostname": node };
    await apply(
      [
        daemonSetYaml(ns, {
          app: "gpu-driver",
          nodeSelector: onNode,
          hostPaths: [`/var/lib/kubelet/plugins/${driver}`, "/var/lib/kubelet/plugins_registry"],
        }),
        deploymentYaml(ns, 3, { app: "web", nodeSelector: pool }),
        deploymentYaml(ns, 2, { app: "train", nodeSelector: pool, claimTemplate: "dev" }),
        pdbYaml(ns, "web", { minAvailable: 2 }),
        pdbYaml(ns, "train", { maxUnavailable: 1 }),
      ].join("---\n"),
    );
    const [driverPod] = await waitReady(ns, "gpu-driver", 1, node);
    const trainPods = await waitReady(ns, "train", 2, node);
    await waitReady(ns, "web", 3, node);
    await waitBudget(ns, "web", 1);
    await waitBudget(ns, "train", 1);
    await setTurns([node]);
    const rec = await recordNamespace(ns);
    const progress: DrainProgress[] = [];
    let second: Promise<void> | undefined;
    const result = await drainNode(agentKc(node), node, {
      timeoutMs: 90_000,
      pollIntervalMs: 250,
      onProgress: (p) => {
        progress.push(p);
        // Somewhere for replacements to go only once a budget held the drain (see drain.test.ts).
        if (p.kind === "blocked" && second === undefined) {
          const name = uniqueName("evict-m");
          cleanups.push(() => remove(["node", name]));
          second = createKwokNode(name, { labels: pool }).then(() =>
            apply(devicesYaml(driver, cls, [name]).split("---\n")[1]!),
          );
          second.catch(() => {});
        }
      },
    });
    await second;
    await waitFor("the recorder to see the driver pod deleted", async () =>
      rec.log.some((e) => e.type === "DELETED" && e.obj.metadata?.uid === driverPod!.metadata!.uid),
    );
    rec.stop();
    expect(rec.errors).toEqual([]);
    expect(
      violations(rec.log, {
        node,
        drivers: [{ uid: driverPod!.metadata!.uid!, driver }],
        budgets: [
          { name: "web", labels: { app: "web" }, minHealthy: 2 },
          { name: "train", labels: { app: "train" }, minHealthy: 1 },
        ],
      }),
    ).toEqual([]);
    expect(result.evicted).toHaveLength(6);
    expect(result.evicted.at(-1)).toBe(`${ns}/${driverPod!.metadata!.name}`);
    const blockedBy = progress.flatMap((p) => (p.kind === "blocked" ? [p.blocker] : []));
    expect(blockedBy.length).toBeGreaterThan(0);
    expect(blockedBy.every((b) => b.by === "budget" && b.pdbs.length === 1)).toBe(true);
    expect(trainPods).toHaveLength(2);
  });
});

describe("when the webhook is down", () => {
  it("agents' evictions fail closed and the drain says why; an admin's eviction still works", async () => {
    const ns = await createNamespace("evict-down");
    cleanups.push(() => remove(["namespace", ns]));
    const node = await machineOnNode("evict-c");
    const [first, second] = [await podOn(ns, node), await podOn(ns, node)];
    await setTurns([node]);
    await webhook!.stop();
    webhook = undefined;

    const progress: DrainProgress[] = [];
    const err = await drainNode(agentKc(node), node, {
      timeoutMs: 8_000,
      pollIntervalMs: 250,
      onProgress: (p) => progress.push(p),
    }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DrainError);
    expect((err as DrainError).code).toBe("LIKEN_DRAIN_DEADLINE");
    const blockers = progress.flatMap((p) => (p.kind === "blocked" ? [p.blocker] : []));
    expect(blockers.length).toBeGreaterThan(0);
    expect(blockers[0]).toMatchObject({ by: "admission", pdbs: [] });
    expect(blockers[0]!.message).toContain("admission check of this eviction could not decide");
    expect(blockers[0]!.message).toContain('failed calling webhook "eviction.liken.sh"');
    expect((err as DrainError).message).toContain(
      "admission check of this eviction could not decide",
    );
    expect(await podExists(first)).toBe(true);
    expect(await podExists(second)).toBe(true);

    // Evictions by anyone else never reach the webhook (matchConditions).
    expect(await evict(kubeConfig(), first)).toEqual({ kind: "accepted" });

    // Back up: the same agent's drain finishes.
    await startWebhook();
    const done = await waitFor("the drain to pass once the webhook is back", () =>
      drainNode(agentKc(node), node, { timeoutMs: 20_000, pollIntervalMs: 250 }).catch(
        () => undefined,
      ),
    );
    expect(done.evicted).toContain(`${ns}/${second.metadata!.name}`);
  });
});

describe("a machine's agent on its own certificate, end to end", () => {
  const fleet = new Fleet();
  afterAll(() => fleet.stop(), 60_000);

  it("while no webhook answers its drain is blocked, visibly; once one does, it finishes its turn", async () => {
    await webhook?.stop();
    webhook = undefined;
    await fleet.start(["2026.10.10-001", "2026.10.12-001"]);
    const [v1, v2] = fleet.releases as [ReleaseRef, ReleaseRef];
    const name = uniqueName("evict-e");
    const { kubeconfig } = mintClientCert({
      user: `liken:machine:${name}`,
      groups: ["liken:machines"],
    });
    await fleet.addMachine({ name, role: "Worker", rebootPolicy: "Auto" }, {}, kubeconfig);
    cleanups.push(
      () => admin.machines.delete(name),
      () => remove(["node", name]),
    );
    const ns = await createNamespace("evict-e");
    cleanups.push(() => remove(["namespace", ns]));
    const pod = await podOn(ns, name);
    fleet.startOperatorStandIn(); // grants turns; serves no webhook
    fleet.powerOnAll();
    await fleet.waitAll(
      "the machine runs the first release",
      (m) => m.status?.version === v1.version,
    );
    await fleet.setTarget(v2);

    // Its turn, its node, and still no eviction: the check fails closed, and says so.
    const blocked = await waitFor(
      "the Machine to show the refused eviction as its drain blocker",
      async () => {
        const m = await admin.machines.get(name);
        const c = m.status?.conditions?.find((x) => x.type === "DrainBlocked");
        return m.status?.drainBlocker !== undefined && c?.status === "True" ? m : undefined;
      },
      { timeoutMs: 120_000, intervalMs: 500 },
    );
    expect(blocked.status?.step).toBe("Updating");
    expect(blocked.status?.drainBlocker?.pod).toBe(`${ns}/${pod.metadata!.name}`);
    expect(blocked.status?.drainBlocker?.message).toContain(
      "admission check of this eviction could not decide",
    );
    expect(blocked.status?.drainBlocker?.message).toContain(
      'failed calling webhook "eviction.liken.sh"',
    );
    expect(await podExists(pod)).toBe(true);

    await startWebhook();
    await fleet.waitAll(
      "the machine to finish its turn on the new release",
      (m) => m.status?.step === "Ready" && m.status.version === v2.version,
      180_000,
    );
    expect(await podExists(pod)).toBe(false);
    expect(
      logLines.some((l) =>
        l.includes(`liken:machine:${name} evicts pod ${ns}/${pod.metadata!.name}`),
      ),
    ).toBe(true);
    expect(fleet.operatorErrors.filter((e) => !/conflict/i.test(e))).toEqual([]);
  }, 400_000);
});
