// Many machines silent at once (a partition, a starved heartbeat sender): the operator marks
// every one Lost, with at most MAX_MARKS_IN_FLIGHT writes in flight (src/operator/run/operator.ts,
// writeLostMarks). A write each at once opened as many TLS connections, with their Events,
// and took most of its CPU at 5,000 machines. The real API server, a real in-process Operator.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Logger } from "../../src/operator/logger.js";
import { MAX_MARKS_IN_FLIGHT, Operator } from "../../src/operator/run/operator.js";
import { kubeConfig, uniqueName, waitFor } from "../support/kube.js";
import {
  api,
  createCluster,
  createMachine,
  deleteAll,
  ensureNamespaces,
} from "./operator-fleet.js";

const SILENT = 3 * MAX_MARKS_IN_FLIGHT;

describe("operator: Lost marks in bounded flight", () => {
  const cluster = uniqueName("marks");
  const names = Array.from({ length: SILENT }, (_, i) => `${cluster}-${i}`);
  const quiet = (): void => {};
  const log: Logger = { info: quiet, warn: quiet, error: quiet };
  const op = new Operator(kubeConfig(), {
    identity: uniqueName("op-marks"),
    startGraceSeconds: 1,
    lostAfterSeconds: 4,
    leaderElection: false,
    log,
  });

  beforeAll(async () => {
    await ensureNamespaces();
    await createCluster(cluster, { maxUnavailable: 1 });
    // No heartbeat Lease at all: 4 s after the operator starts, every one reads Lost.
    for (let i = 0; i < names.length; i += 8) {
      await Promise.all(names.slice(i, i + 8).map((name) => createMachine(cluster, { name })));
    }
    await op.start();
  }, 120_000);

  afterAll(async () => {
    await op.stop();
    await deleteAll(cluster, names);
  });

  it(`marks all ${SILENT} Lost, at most ${MAX_MARKS_IN_FLIGHT} writes at once`, async () => {
    await waitFor(
      `all ${SILENT} machines marked Lost`,
      async () => {
        const list = await api.machines.list({ fieldSelector: `spec.cluster=${cluster}` });
        return list.items.filter((m) => m.status?.step === "Lost").length === SILENT;
      },
      { timeoutMs: 120_000 },
    );
    expect(op.stats.marksInFlightPeak).toBeGreaterThan(0);
    expect(op.stats.marksInFlightPeak).toBeLessThanOrEqual(MAX_MARKS_IN_FLIGHT);
  }, 150_000);
});
