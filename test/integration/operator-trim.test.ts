// What the operator keeps of each watched object (src/operator/run/trim.ts): the fields it reads,
// not managedFields, which the API server adds to every object written (the agent's and the
// operator's status writes) and which were most of the watch caches at 5,000 Machines. The real
// API server, a real in-process Operator, its watches as `liken operator` builds them.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Logger } from "../../src/operator/logger.js";
import { Operator } from "../../src/operator/run/operator.js";
import { kubeConfig, uniqueName, waitFor } from "../support/kube.js";
import {
  api,
  createCluster,
  createMachine,
  deleteAll,
  ensureNamespaces,
  stagedStatus,
  writeStatus,
} from "./operator-fleet.js";

/** metadata.managedFields, which liken's types leave out (nothing in liken reads it). */
const managed = (o: { metadata: object }): unknown[] | undefined =>
  (o.metadata as { managedFields?: unknown[] }).managedFields;

describe("operator: trimmed watch caches", () => {
  const cluster = uniqueName("trim");
  const m = uniqueName("trim-m");
  const quiet = (): void => {};
  const log: Logger = { info: quiet, warn: quiet, error: quiet };
  const op = new Operator(kubeConfig(), {
    identity: uniqueName("op-trim"),
    startGraceSeconds: 1,
    leaderElection: false,
    log,
  });

  beforeAll(async () => {
    await ensureNamespaces();
    await createCluster(cluster, { maxUnavailable: 1 });
    const made = await createMachine(cluster, { name: m });
    await writeStatus(made, stagedStatus());
    await op.start();
  });

  afterAll(async () => {
    await op.stop();
    await deleteAll(cluster, [m]);
  });

  it("keeps a Machine's spec, status and labels, and none of its managedFields", async () => {
    // The server's copy has them: the test means something.
    const onServer = await api.machines.get(m);
    expect(managed(onServer)?.length ?? 0).toBeGreaterThan(0);
    const kept = await waitFor("the operator's cache to hold the staged Machine", async () => {
      const x = op.fleet.machines().find((y) => y.metadata.name === m);
      return x?.status?.step === "UpdatePending" ? x : undefined;
    });
    expect(managed(kept)).toBeUndefined();
    expect(kept.metadata.resourceVersion).toBeDefined();
    expect(kept.metadata.labels?.["liken.sh/cluster"]).toBe(cluster);
    expect(kept.spec.cluster).toBe(cluster);
    expect(kept.status?.turnRequest?.version).toBe(onServer.status?.turnRequest?.version);
  });

  it("keeps the Cluster it decides on without managedFields, and its own writes still land", async () => {
    // The operator's status write (made from the trimmed Cluster) is accepted: the grant.
    const granted = await waitFor("the operator to grant the turn", async () => {
      const c = await api.clusters.get(cluster);
      return c.status?.rebootTurns?.some((t) => t.machine === m) === true ? c : undefined;
    });
    // The server kept the managedFields a write without them leaves alone.
    expect(managed(granted)?.length ?? 0).toBeGreaterThan(0);
    const kept = await waitFor("the operator's cache to hold its own write", async () => {
      const c = op.fleet.clusters().find((x) => x.metadata.name === cluster);
      return c?.status?.rebootTurns?.some((t) => t.machine === m) === true ? c : undefined;
    });
    expect(managed(kept)).toBeUndefined();
    expect(kept.spec.disruption?.maxUnavailable).toBe(1);
  });
});
