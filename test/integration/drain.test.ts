// The drain on the real control plane: the real scheduler allocates the DRA claims, the real
// disruption controller computes the budgets, the real resourceclaim controller releases
// claims once their pods are gone, kwok plays the kubelets. An independent recorder (watches
// started before the drain) is the judge, through test/support/drain-invariants.ts.
import { afterAll, describe, expect, it } from "vitest";
import { CoreV1Api, PatchStrategy, setHeaderOptions, type V1Pod } from "@kubernetes/client-node";
import { EXCLUDE_LB_LABEL, LB_EXCLUDED_BY_ANNOTATION } from "../../src/drain/lb-exclusion.js";
import {
  CORDONED_BY_ANNOTATION,
  DrainError,
  drainNode,
  uncordonNode,
  type DrainProgress,
} from "../../src/drain/index.js";
import {
  createKwokNode,
  createNamespace,
  kubeConfig,
  uniqueName,
  waitFor,
} from "../support/kube.js";
import {
  apply,
  claimTemplateYaml,
  daemonSetYaml,
  deploymentYaml,
  devicesYaml,
  nodeEvents,
  pdbYaml,
  podHeldByBudget,
  podsOf,
  recordNamespace,
  remove,
  waitBudget,
  waitReady,
  type Recorder,
} from "../support/drain-helpers.js";
import { violations, type Recorded } from "../support/drain-invariants.js";

const kc = kubeConfig();
const core = kc.makeApiClient(CoreV1Api);
const cleanups: (() => Promise<void>)[] = [];
afterAll(async () => {
  for (const c of cleanups.reverse()) await c();
});

const POLL_MS = 250;
const PLUGINS = "/var/lib/kubelet/plugins";
const uidOf = (p: V1Pod) => p.metadata?.uid ?? "";
const refOf = (p: V1Pod) => `${p.metadata?.namespace}/${p.metadata?.name}`;

/** A namespace, kwok nodes in one pool, and a DRA driver with devices on the first node. */
async function scene(prefix: string) {
  const ns = await createNamespace(prefix);
  const pool = { "liken-test/pool": ns };
  const node = uniqueName(`${prefix}-n`);
  const driver = `${uniqueName(prefix)}.example.com`;
  const cls = uniqueName(`${prefix}-dev`);
  await createKwokNode(node, { labels: pool });
  await apply(devicesYaml(driver, cls, [node]) + "---\n" + claimTemplateYaml(ns, "dev", cls));
  const nodes = [node];
  cleanups.push(async () => {
    await remove(["namespace", ns]);
    await remove(["deviceclass", cls]);
    for (const n of nodes) await remove(["resourceslice", `${n}-${cls}`]);
    for (const n of nodes) await remove(["node", n]);
  });
  const addNode = async (name: string) => {
    nodes.push(name);
    await createKwokNode(name, { labels: pool });
    // The slice alone (the DeviceClass exists): a replacement pod finds devices there.
    const slice = devicesYaml(driver, cls, [name]).split("---\n")[1]!;
    await apply(slice);
  };
  return { ns, pool, node, driver, cls, addNode, onNode: { "kubernetes.io/hostname": node } };
}

function leftAt(log: readonly Recorded[], uid: string): number | undefined {
  const e = log
    .filter((x) => x.kind === "Pod" && x.obj.metadata?.uid === uid)
    .find((x) => x.type === "DELETED" || x.obj.metadata?.deletionTimestamp != null);
  return e?.rv;
}

async function recorderSaw(rec: Recorder, what: string, uid: string): Promise<void> {
  await waitFor(`the recorder to see ${what} deleted`, async () =>
    rec.log.some((e) => e.type === "DELETED" && e.obj.metadata?.uid === uid),
  );
}

describe("drain on a real control plane", () => {
  it("evicts claim holders before their driver, keeps every budget, and finishes", async () => {
    const s = await scene("drain");
    await apply(
      [
        daemonSetYaml(s.ns, {
          app: "gpu-driver",
          nodeSelector: s.onNode,
          hostPaths: [`${PLUGINS}/${s.driver}`, "/var/lib/kubelet/plugins_registry"],
        }),
        deploymentYaml(s.ns, 3, { app: "web", nodeSelector: s.pool }),
        deploymentYaml(s.ns, 2, { app: "train", nodeSelector: s.pool, claimTemplate: "dev" }),
        pdbYaml(s.ns, "web", { minAvailable: 2 }),
        pdbYaml(s.ns, "train", { maxUnavailable: 1 }),
      ].join("---\n"),
    );
    const [driverPod] = await waitReady(s.ns, "gpu-driver", 1, s.node);
    const trainPods = await waitReady(s.ns, "train", 2, s.node);
    await waitReady(s.ns, "web", 3, s.node);
    await waitBudget(s.ns, "web", 1);
    await waitBudget(s.ns, "train", 1);
    const rec = await recordNamespace(s.ns);
    const progress: DrainProgress[] = [];
    // The replacements get somewhere to go only once a budget has held the drain: with a
    // second node from the start, kwok makes replacements Ready so fast that a budget may
    // never refuse an eviction, and the test would prove nothing about budgets.
    let secondNode: Promise<void> | undefined;
    const result = await drainNode(kc, s.node, {
      timeoutMs: 90_000,
      pollIntervalMs: POLL_MS,
      onProgress: (p) => {
        progress.push(p);
        if (p.kind === "blocked" && secondNode === undefined) {
          secondNode = s.addNode(uniqueName("drain-m"));
          secondNode.catch(() => {}); // surfaced by the await after the drain
        }
      },
    });
    await secondNode;
    await recorderSaw(rec, "the driver pod", uidOf(driverPod!));
    rec.stop();

    expect(rec.errors).toEqual([]);
    expect(
      violations(rec.log, {
        node: s.node,
        drivers: [{ uid: uidOf(driverPod!), driver: s.driver }],
        budgets: [
          { name: "web", labels: { app: "web" }, minHealthy: 2 },
          { name: "train", labels: { app: "train" }, minHealthy: 1 },
        ],
      }),
    ).toEqual([]);
    // Not vacuous: every pod left, the driver last, after both claim holders were gone.
    expect(result.evicted).toHaveLength(6);
    expect(result.evicted.at(-1)).toBe(refOf(driverPod!));
    const driverLeft = leftAt(rec.log, uidOf(driverPod!))!;
    for (const t of trainPods) {
      const gone = rec.log.find((e) => e.type === "DELETED" && e.obj.metadata?.uid === uidOf(t));
      expect(gone!.rv).toBeLessThan(driverLeft);
    }
    // A budget held the drain (the replacements had nowhere to go yet), and the drain named it.
    const said = JSON.stringify(progress.map((p) => (p.kind === "warning" ? p.message : p.kind)));
    const blockedBy = progress.flatMap((p) => (p.kind === "blocked" ? p.blocker.pdbs : []));
    expect(blockedBy.length, said).toBeGreaterThan(0);
    expect(
      blockedBy.every((b) => b === `${s.ns}/web` || b === `${s.ns}/train`),
      said,
    ).toBe(true);
    expect(result.drivers.map((d) => [d.driver, d.by, d.pods])).toEqual([
      [s.driver, "plugin-dir", [refOf(driverPod!)]],
    ]);
    expect(result.drivers[0]!.claims).toHaveLength(2);

    // The node stays cordoned, marked as liken's, until liken uncordons it.
    const node = await core.readNode({ name: s.node });
    expect(node.spec?.unschedulable).toBe(true);
    expect(node.metadata?.annotations?.[CORDONED_BY_ANNOTATION]).toBe("liken");
    const still = (await podsOf(s.ns)).filter((p) => p.spec?.nodeName === s.node);
    expect(still.map(uidOf)).not.toContain(uidOf(driverPod!)); // only a new DaemonSet pod
    expect(still.every((p) => p.metadata?.labels?.app === "gpu-driver")).toBe(true);
    expect(await uncordonNode(kc, s.node)).toBe("uncordoned");
    const after = await core.readNode({ name: s.node });
    expect(after.spec?.unschedulable).toBeFalsy();
    expect(after.metadata?.annotations?.[CORDONED_BY_ANNOTATION]).toBeUndefined();
  });

  it("stops at the deadline on a budget that cannot be met; names pod and budget; stays cordoned", async () => {
    const s = await scene("drain-pdb");
    const solo = await podHeldByBudget(s.ns, "solo", s.pool, s.node);

    const progress: DrainProgress[] = [];
    const started = Date.now();
    const err = await drainNode(kc, s.node, {
      timeoutMs: 5_000,
      pollIntervalMs: POLL_MS,
      onProgress: (p) => progress.push(p),
    }).catch((e: unknown) => e);
    const took = Date.now() - started;

    expect(err).toBeInstanceOf(DrainError);
    const e = err as DrainError;
    expect(e.code).toBe("LIKEN_DRAIN_DEADLINE");
    expect(e.message).toContain(refOf(solo));
    expect(e.message).toContain(`PodDisruptionBudget ${s.ns}/solo`);
    expect(e.message).toContain("stays cordoned");
    expect(e.context.blockers).toEqual([
      expect.objectContaining({ pod: refOf(solo), pdbs: [`${s.ns}/solo`] }),
    ]);
    expect(took).toBeGreaterThanOrEqual(5_000);
    expect(took).toBeLessThan(15_000);
    expect(progress).toContainEqual(
      expect.objectContaining({
        kind: "blocked",
        blocker: expect.objectContaining({ pod: refOf(solo), pdbs: [`${s.ns}/solo`] }),
      }),
    );
    // The pod is still there and untouched; the node is still cordoned by liken.
    const pod = await core.readNamespacedPod({ name: solo.metadata!.name!, namespace: s.ns });
    expect(pod.metadata?.uid).toBe(uidOf(solo));
    expect(pod.metadata?.deletionTimestamp).toBeUndefined();
    const node = await core.readNode({ name: s.node });
    expect(node.spec?.unschedulable).toBe(true);
    expect(node.metadata?.annotations?.[CORDONED_BY_ANNOTATION]).toBe("liken");
    // People see it on the Node.
    const blocked = await nodeEvents(s.node, "DrainBlocked");
    expect(blocked.map((x) => x.message)).toEqual([
      expect.stringContaining(`PodDisruptionBudget ${s.ns}/solo`),
    ]);
    expect(await nodeEvents(s.node, "DrainDeadline")).toHaveLength(1);
  });

  it("a stop (the caller's target changed) ends the drain at once and undoes liken's cordon", async () => {
    const s = await scene("drain-stop");
    const solo = await podHeldByBudget(s.ns, "solo", s.pool, s.node);

    // Stopped as soon as the budget refuses the eviction: long before the deadline.
    const stop = new AbortController();
    const started = Date.now();
    const err = await drainNode(kc, s.node, {
      timeoutMs: 20_000,
      pollIntervalMs: POLL_MS,
      stop: stop.signal,
      onProgress: (p) => {
        if (p.kind === "blocked") stop.abort(new Error("the target changed from A to B"));
      },
    }).catch((e: unknown) => e);

    expect(err).toBeInstanceOf(DrainError);
    const e = err as DrainError;
    expect(e.code).toBe("LIKEN_DRAIN_STOPPED");
    expect(e.message).toBe(
      `node ${s.node}: drain stopped before it finished: the target changed from A to B. ` +
        "0 pod(s) were evicted, no further eviction is made; liken's cordon is undone and the " +
        "node takes pods again.",
    );
    expect(Date.now() - started).toBeLessThan(15_000);
    const node = await core.readNode({ name: s.node });
    expect(node.spec?.unschedulable ?? false).toBe(false);
    expect(node.metadata?.annotations?.[CORDONED_BY_ANNOTATION]).toBeUndefined();
    const pod = await core.readNamespacedPod({ name: solo.metadata!.name!, namespace: s.ns });
    expect(pod.metadata?.deletionTimestamp).toBeUndefined();
    const stopped = await nodeEvents(s.node, "DrainStopped");
    expect(stopped.map((x) => [x.type, x.message])).toEqual([["Normal", e.message]]);
  });

  it("says when a driver cannot be identified, and evicts the pods that may run it last", async () => {
    const s = await scene("drain-unid");
    await apply(
      [
        deploymentYaml(s.ns, 1, { app: "user", nodeSelector: s.pool, claimTemplate: "dev" }),
        // Mounts the whole plugin directory, as dra-example-driver's chart does: it may be
        // the driver, but nothing says so.
        deploymentYaml(s.ns, 1, { app: "maybe", nodeSelector: s.pool, hostPaths: [PLUGINS] }),
        deploymentYaml(s.ns, 1, { app: "web", nodeSelector: s.pool }),
      ].join("---\n"),
    );
    const [user] = await waitReady(s.ns, "user", 1, s.node);
    const [maybe] = await waitReady(s.ns, "maybe", 1, s.node);
    const [web] = await waitReady(s.ns, "web", 1, s.node);

    const rec = await recordNamespace(s.ns);
    const progress: DrainProgress[] = [];
    const result = await drainNode(kc, s.node, {
      timeoutMs: 60_000,
      pollIntervalMs: POLL_MS,
      onProgress: (p) => progress.push(p),
    });
    await recorderSaw(rec, "the candidate pod", uidOf(maybe!));
    rec.stop();

    expect(result.unidentifiedDrivers).toEqual([s.driver]);
    expect(progress).toContainEqual(
      expect.objectContaining({
        kind: "driver-unidentified",
        driver: s.driver,
        keptUntilLast: [refOf(maybe!)],
      }),
    );
    expect(result.evicted.slice(0, 2).sort()).toEqual([refOf(user!), refOf(web!)].sort());
    expect(result.evicted.at(-1)).toBe(refOf(maybe!));
    // The candidate is judged as the driver would be: after the holder is gone and released.
    expect(
      violations(rec.log, {
        node: s.node,
        drivers: [{ uid: uidOf(maybe!), driver: s.driver }],
        budgets: [],
      }),
    ).toEqual([]);
    expect(leftAt(rec.log, uidOf(maybe!))).toBeGreaterThan(leftAt(rec.log, uidOf(user!))!);
    const said = await nodeEvents(s.node, "DrainDriverUnidentified");
    expect(said.map((x) => x.message)).toEqual([expect.stringContaining(s.driver)]);
  });

  it("leaves a DaemonSet pod that holds a claim, and keeps the driver that serves it", async () => {
    const s = await scene("drain-dsc");
    await apply(
      [
        daemonSetYaml(s.ns, {
          app: "gpu-driver",
          nodeSelector: s.onNode,
          hostPaths: [`${PLUGINS}/${s.driver}`],
        }),
        daemonSetYaml(s.ns, { app: "ds-user", nodeSelector: s.onNode, claimTemplate: "dev" }),
        deploymentYaml(s.ns, 1, { app: "train", nodeSelector: s.pool, claimTemplate: "dev" }),
      ].join("---\n"),
    );
    const [driverPod] = await waitReady(s.ns, "gpu-driver", 1, s.node);
    const [dsUser] = await waitReady(s.ns, "ds-user", 1, s.node);
    const [train] = await waitReady(s.ns, "train", 1, s.node);

    const rec = await recordNamespace(s.ns);
    const result = await drainNode(kc, s.node, { timeoutMs: 60_000, pollIntervalMs: POLL_MS });
    await recorderSaw(rec, "the claim holder", uidOf(train!));
    rec.stop();

    expect(result.evicted).toEqual([refOf(train!)]);
    expect(result.left).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ pod: refOf(dsUser!), reason: "daemonset-pod" }),
        expect.objectContaining({ pod: refOf(driverPod!), reason: "driver-of-left-pod" }),
      ]),
    );
    expect(leftAt(rec.log, uidOf(driverPod!))).toBeUndefined();
    expect(leftAt(rec.log, uidOf(dsUser!))).toBeUndefined();
    expect(
      violations(rec.log, {
        node: s.node,
        drivers: [{ uid: uidOf(driverPod!), driver: s.driver }],
        budgets: [],
      }),
    ).toEqual([]);
  });

  it("the recorder catches a driver evicted while a claim it serves is reserved", async () => {
    const s = await scene("drain-bad");
    await apply(
      [
        daemonSetYaml(s.ns, {
          app: "gpu-driver",
          nodeSelector: s.onNode,
          hostPaths: [`${PLUGINS}/${s.driver}`],
        }),
        deploymentYaml(s.ns, 1, { app: "train", nodeSelector: s.pool, claimTemplate: "dev" }),
      ].join("---\n"),
    );
    const [driverPod] = await waitReady(s.ns, "gpu-driver", 1, s.node);
    const [train] = await waitReady(s.ns, "train", 1, s.node);

    const rec = await recordNamespace(s.ns);
    // The wrong order, by hand: the driver first.
    await core.createNamespacedPodEviction({
      name: driverPod!.metadata!.name!,
      namespace: s.ns,
      body: { metadata: { name: driverPod!.metadata!.name!, namespace: s.ns } },
    });
    await recorderSaw(rec, "the driver pod", uidOf(driverPod!));
    rec.stop();

    expect(
      violations(rec.log, {
        node: s.node,
        drivers: [{ uid: uidOf(driverPod!), driver: s.driver }],
        budgets: [],
      }),
    ).toEqual([
      `driver pod ${driverPod!.metadata!.name} left while claim holder ${uidOf(train!)} was still on the API server`,
      expect.stringMatching(
        new RegExp(
          `^driver pod ${driverPod!.metadata!.name} left while claim .* was reserved for ${train!.metadata!.name}$`,
        ),
      ),
    ]);
  });

  it("takes the node out of the load balancers, waits, then evicts; the label goes with liken's uncordon only", async () => {
    const s = await scene("drain-lb");
    await apply(deploymentYaml(s.ns, 1, { app: "web", nodeSelector: s.pool }));
    await waitReady(s.ns, "web", 1, s.node);
    const seen: { p: DrainProgress; at: number }[] = [];
    await drainNode(kc, s.node, {
      timeoutMs: 30_000,
      pollIntervalMs: POLL_MS,
      loadBalancerDelayMs: 2_000,
      onProgress: (p) => seen.push({ p, at: Date.now() }),
    });
    const excluded = seen.find((x) => x.p.kind === "excluded");
    const evicting = seen.find((x) => x.p.kind === "evicting");
    expect(excluded?.p).toEqual({ kind: "excluded", node: s.node, waitMs: 2_000 });
    expect(evicting!.at - excluded!.at).toBeGreaterThanOrEqual(2_000);
    const drained = await core.readNode({ name: s.node });
    expect(drained.metadata?.labels?.[EXCLUDE_LB_LABEL]).toBe("true");
    expect(await uncordonNode(kc, s.node)).toBe("uncordoned");
    const back = await core.readNode({ name: s.node });
    expect(back.metadata?.labels?.[EXCLUDE_LB_LABEL]).toBeUndefined();
    expect(back.metadata?.annotations?.[LB_EXCLUDED_BY_ANNOTATION]).toBeUndefined();

    // A label a person set before the drain: no wait, and it stays after liken's uncordon.
    await core.patchNode(
      { name: s.node, body: { metadata: { labels: { [EXCLUDE_LB_LABEL]: "true" } } } },
      setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
    );
    const again: DrainProgress[] = [];
    await drainNode(kc, s.node, {
      timeoutMs: 30_000,
      pollIntervalMs: POLL_MS,
      loadBalancerDelayMs: 2_000,
      onProgress: (p) => again.push(p),
    });
    expect(again.some((p) => p.kind === "excluded")).toBe(false);
    expect(await uncordonNode(kc, s.node)).toBe("uncordoned");
    const kept = await core.readNode({ name: s.node });
    expect(kept.metadata?.labels?.[EXCLUDE_LB_LABEL]).toBe("true");
  });

  it("leaves a person's cordon in place, and refuses a node that does not exist", async () => {
    const node = uniqueName("drain-person");
    await createKwokNode(node);
    cleanups.push(() => remove(["node", node]));
    await core.patchNode(
      { name: node, body: { spec: { unschedulable: true } } },
      setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
    );
    const result = await drainNode(kc, node, { timeoutMs: 20_000, pollIntervalMs: POLL_MS });
    expect(result.cordon).toBe("someone-elses");
    expect(await uncordonNode(kc, node)).toBe("not-ours");
    const after = await core.readNode({ name: node });
    expect(after.spec?.unschedulable).toBe(true);
    expect(after.metadata?.annotations?.[CORDONED_BY_ANNOTATION]).toBeUndefined();

    const missing = await drainNode(kc, uniqueName("no-such-node"), { timeoutMs: 5_000 }).catch(
      (e: unknown) => e,
    );
    expect(missing).toMatchObject({ code: "LIKEN_DRAIN_NODE_NOT_FOUND" });
  });
});
