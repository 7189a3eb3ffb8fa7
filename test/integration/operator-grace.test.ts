// The start-up grace as shipped (the page: "When cluster-operator starts ... it grants no turn
// for its first 40 seconds"): `liken operator` runs with its defaults, no --start-grace, and
// an independent watcher (Fleet) notes when it first sees each turn recorded. Then the copy is
// frozen with SIGSTOP past the pause detector's threshold while a second machine asks, and
// woken: a copy that paused has a stale view, so it grants nothing for a fresh 40 s.
//
// Leader election is off only so that the grace alone decides when the first grant comes
// (a Lease held by an earlier test's copy would delay it and hide a missing grace).
import { expect, it } from "vitest";
import { START_GRACE_SECONDS } from "../../src/api/index.js";
import { PAUSE_MS } from "../../src/operator/run/liveness.js";
import { uniqueName, waitFor } from "../support/kube.js";
import {
  api,
  fileCleanups,
  playFleet,
  stagedStatus,
  startedOperator,
  waitForLog,
  writeStatus,
  type MachinePlan,
} from "./operator-fleet.js";

const cleanups = fileCleanups("all");
const GRACE_MS = START_GRACE_SECONDS * 1000;

it(`grants nothing for ${START_GRACE_SECONDS} s after it starts, and again after it wakes from SIGSTOP`, async () => {
  expect(START_GRACE_SECONDS).toBe(40); // the page's number
  const cluster = uniqueName("grace");
  const plans: MachinePlan[] = [{ name: uniqueName("w1") }, { name: uniqueName("w2") }];
  const [w1, w2] = plans.map((p) => p.name) as [string, string];
  const { fleet } = await playFleet(cleanups, cluster, plans, {
    cluster: { maxUnavailable: 1 },
    beatEveryMs: 1000,
  });
  await writeStatus(w1, stagedStatus()); // asks before the operator starts

  const spawnedAt = Date.now();
  const op = await startedOperator(cleanups, ["--no-leader-elect"], {
    id: "shipped",
    timeoutMs: 120_000,
  });
  // A start slower than the grace would let a missing grace pass unseen.
  const startMs = Date.now() - spawnedAt;
  expect(startMs, "the operator must start well within the grace to test it").toBeLessThan(
    GRACE_MS / 2,
  );
  await waitFor("w1's turn", async () => fleet.grantSeenAt.get(w1), {
    timeoutMs: GRACE_MS + 60_000,
  });
  const firstGrantMs = fleet.grantSeenAt.get(w1)! - spawnedAt;
  console.log(`first grant seen ${firstGrantMs} ms after the operator was spawned`);
  expect(firstGrantMs).toBeGreaterThanOrEqual(GRACE_MS);
  await waitFor("w1 back and its record gone", async () => {
    const c = await api.clusters.get(cluster);
    return fleet.finished.has(w1) && (c.status?.rebootTurns ?? []).length === 0;
  });

  // Frozen past the pause threshold while w2 asks; then woken.
  const pid = op.child.pid!;
  process.kill(pid, "SIGSTOP");
  const frozenAt = Date.now();
  let wokeAt = 0;
  try {
    await writeStatus(w2, stagedStatus());
    // The freeze is the fault itself: it must outlast the detector's threshold to count.
    await waitFor("the freeze to outlast the pause threshold", async () => {
      return Date.now() - frozenAt >= PAUSE_MS + 1000;
    });
  } finally {
    wokeAt = Date.now(); // before the signal: the fresh grace cannot start earlier
    process.kill(pid, "SIGCONT");
  }
  await waitForLog(op, "this copy was paused");
  await waitFor("w2's turn", async () => fleet.grantSeenAt.get(w2), {
    timeoutMs: GRACE_MS + 60_000,
  });
  const afterWakeMs = fleet.grantSeenAt.get(w2)! - wokeAt;
  console.log(`w2's grant seen ${afterWakeMs} ms after the copy was woken`);
  expect(afterWakeMs).toBeGreaterThanOrEqual(GRACE_MS);
  await waitFor("w2 back", async () => fleet.finished.has(w2));
  await fleet.stop();
  expect(fleet.violations).toEqual([]);
}, 400_000);
