// The operator's wall clock stepped back by hours while it runs (NTP after a long drift, a
// person with `date -s`), on the real control plane. The Operator runs in this process with a
// wall clock the test moves (OperatorOptions.clocks; the monotonic clock is the real one, as a
// clock step leaves it). Two promises:
//  - a machine that went silent right before the step still reads Lost after --lost-after:
//    Lost is judged on the monotonic clock (on the wall clock, its last renewal sat 3 h "in the
//    future" and it would have read alive for 3 h);
//  - the start-up grace, a wall time, does not hold every grant for the 3 h of the step: the
//    copy notices the step and counts its grace again from the new time.
import { performance } from "node:perf_hooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Machine } from "../../src/api/types.js";
import type { Logger } from "../../src/operator/logger.js";
import { Operator } from "../../src/operator/run/operator.js";
import { kubeConfig, uniqueName, waitFor } from "../support/kube.js";
import {
  Heartbeats,
  api,
  createCluster,
  createMachine,
  deleteAll,
  ensureNamespaces,
  stagedStatus,
  writeStatus,
} from "./operator-fleet.js";

const HOURS_3_MS = 3 * 3_600_000;
const LOST_AFTER_S = 5;

describe("operator: its wall clock stepped back 3 h", () => {
  const cluster = uniqueName("clockstep");
  const x = uniqueName("cs-x");
  const y = uniqueName("cs-y");
  let offset = 0;
  const lines: string[] = [];
  const log: Logger = {
    info: (o, msg) => lines.push(`${msg ?? ""} ${JSON.stringify(o)}`),
    warn: (o, msg) => lines.push(`${msg ?? ""} ${JSON.stringify(o)}`),
    error: (o, msg) => lines.push(`${msg ?? ""} ${JSON.stringify(o)}`),
  };
  const beats = new Heartbeats(cluster, [x, y], 500);
  const op = new Operator(kubeConfig(), {
    identity: uniqueName("op-clock"),
    startGraceSeconds: 1,
    lostAfterSeconds: LOST_AFTER_S,
    leaderElection: false,
    log,
    clocks: { wall: () => Date.now() + offset, mono: () => performance.now() },
  });

  beforeAll(async () => {
    await ensureNamespaces();
    // Budget 2: x Lost and y's turn fit together.
    await createCluster(cluster, { maxUnavailable: 2 });
    await createMachine(cluster, { name: x });
    await createMachine(cluster, { name: y });
    await beats.start();
    await op.start();
  }, 60_000);
  afterAll(async () => {
    await op.stop();
    beats.stop();
    await deleteAll(cluster, [x, y]);
  }, 30_000);

  it("still grants after its grace, and still reads a silent machine Lost", async () => {
    await waitFor(
      "the start-up grace to end (Progressing no longer StartupGrace)",
      async () => {
        const c = await api.clusters.get(cluster);
        const p = c.status?.conditions?.find((k) => k.type === "Progressing");
        return p !== undefined && p.reason !== "StartupGrace";
      },
      { timeoutMs: 20_000, intervalMs: 200 },
    );

    // x dies, and right after (before its 5 s run out) the wall clock goes back 3 h: its last
    // renewal, as the operator saw it, is now 3 h "in the future" of the wall clock.
    beats.silent.add(x);
    const silentAt = performance.now();
    offset = -HOURS_3_MS;
    await waitFor(
      "the copy to notice the step",
      async () => lines.some((l) => l.startsWith("the wall clock was stepped back")),
      { timeoutMs: 5_000, intervalMs: 100 },
    );

    await writeStatus(y, stagedStatus());
    const turn = await waitFor(
      `a turn for ${y} after the step (the grace counted again from the new time)`,
      async () => {
        const c = await api.clusters.get(cluster);
        return c.status?.rebootTurns?.find((t) => t.machine === y);
      },
      { timeoutMs: 15_000, intervalMs: 200 },
    );
    // Granted on the stepped clock: the record carries the operator's (new) wall time.
    expect(Date.parse(turn.grantedAt)).toBeLessThan(Date.now() - HOURS_3_MS + 60_000);

    const lost = await waitFor(
      `${x} marked Lost ${LOST_AFTER_S} s after its last renewal`,
      async () => {
        const m: Machine = await api.machines.get(x);
        return m.status?.step === "Lost" ? m : undefined;
      },
      { timeoutMs: (LOST_AFTER_S + 20) * 1000, intervalMs: 200 },
    );
    expect(performance.now() - silentAt).toBeGreaterThanOrEqual((LOST_AFTER_S - 1) * 1000);
    expect(lost.status?.conditions?.find((c) => c.type === "Alive")).toMatchObject({
      status: "False",
      reason: "NoHeartbeat",
    });
    // y, renewing all along, is not Lost.
    expect((await api.machines.get(y)).status?.step).not.toBe("Lost");
  }, 90_000);
});
