// The slice of `npm run torture` in `npm test`: one short run of real processes (the lab's
// control plane, two operator copies, four agents with file slots, each behind its relay)
// under seed 282's faults: an operator copy paused past its lease, etcd killed and restarted,
// the client CA rotated for one machine (its certificate re-signed by a CA the API server does
// not trust, its agent restarted: it must rejoin by itself, proving its key), spec.version
// retargeted to a newer release mid-rollout, then set to a release whose kernel panics on its
// trial (the fleet must stop it before the good target is set back), an agent killed.
// The independent watcher's history must pass every rule of the invariant checker and the
// torture's own (no machine Ready on the bad release, the bad release stopped), and the fleet
// must converge on the retargeted release. With the bad release comes spec.rollout.revert's
// threshold of one failed machine, so the operator may revert by itself; a revert that starts
// must end.
// A second short run, seed 636 with three machines, follows the lab's signed channel: a power
// cut, a newer release published mid-rollout, then a signed recall of it (the operator must
// show it within its channel interval and grant nothing for it after), then the publisher's fix,
// which the fleet must end on; and a network cut.
// A third, seed 3311 with three machines and a 70 s window, also follows the channel: a network
// cut, an agent killed, then a release that panics on its trial published in the channel once
// two machines run the target, with the revert threshold of one failed machine. The operator
// reverts by itself to the last known good (the fleet's first release), which takes those two
// machines back down; the publisher recalls the bad release while they go, and the revert must
// still end (a recall stops turns for a release, not the way back from it); then the fix.
import { describe, expect, it } from "vitest";
import { describeFault, followsChannel, LATE_KINDS } from "../../src/torture/schedule.js";
import {
  BAD_VERSION,
  FIX_VERSION,
  runTorture,
  violationReport,
  type RunResult,
} from "../../src/torture/run.js";

/** Seed 282 with four machines: budget 1 (a broken budget check shows at once), every late kind. */
const SEED = 282;

/** One seed's run; its progress lines are the run record's (.lab/torture), not the test's. */
const tortureRun = (seed: number, machines: number, durationMs: number): Promise<RunResult> =>
  runTorture({ seed, machines, durationMs, log: () => undefined });

/** No rule broken (each violation printed with the schedule), every machine Ready on `target`. */
function expectClean(r: RunResult, target: string): void {
  const report = r.violations.flatMap((v) => violationReport(r, v)).join("\n");
  expect(report, `violations (faults applied: ${r.applied.join("; ")})`).toBe("");
  expect(r.unconverged, `machines not Ready on ${target} at the deadline`).toEqual([]);
}

describe("npm run torture (one short run)", () => {
  it("keeps every safety rule under seed 282's faults and converges", async () => {
    const r = await tortureRun(SEED, 4, 40_000);
    expect(r.shape.maxUnavailable).toBe(1);
    expect(r.shape.faults.map(describeFault)).toEqual([
      "+4.8s SIGSTOP operator-1 for 25465 ms",
      "+13.5s SIGKILL etcd, restarted after 515 ms",
      "+20.9s client CA rotated for node-3: its certificate re-signed by an untrusted CA, its agent restarted",
      "+31.8s a newer release made the target mid-rollout (spec.version, or published in the followed channel)",
      "+31.9s spec.version set to a release that panics on its trial, with a revert threshold of one failed machine, the target set back once the fleet stops it (at most 79922 ms)",
      "+36.9s SIGKILL agent node-4",
    ]);
    // Every kind issue 38 added is drawn by this seed.
    expect(LATE_KINDS.filter((k) => !r.shape.faults.some((f) => f.kind === k))).toEqual([]);
    // And each was applied, not skipped: etcd came back, the bad release was stopped.
    expect(
      r.applied.filter((l) => /etcd|spec\.version|CA rotated/.test(l) && !/: done/.test(l)),
    ).toEqual([]);
    expectClean(r, "the target");
  });

  it("keeps every rule under seed 636's faults, a signed recall among them, and ends on the fix", async () => {
    const r = await tortureRun(636, 3, 40_000);
    expect(followsChannel(r.shape)).toBe(true);
    expect(r.shape.faults.map((f) => f.kind)).toEqual([
      "power-cut",
      "retarget",
      "recall",
      "relay-cut",
    ]);
    // The retarget was a publish into the channel, and the recall was shown on the Cluster.
    const retarget = r.applied.find((l) => l.includes("newer release")) ?? "";
    expect(retarget).toContain(": done (2026.10.15-001 published in the signed channel");
    const recall = r.applied.find((l) => l.includes("recalled")) ?? "";
    expect(recall).toContain(": done (2026.10.15-001 recalled; shown on the Cluster after ");
    expect(recall).toContain(`fix ${FIX_VERSION} published)`);
    expectClean(r, FIX_VERSION);
  });

  it("keeps every rule under seed 3311's faults: a bad release published, reverted, recalled mid-revert", async () => {
    const r = await tortureRun(3311, 3, 70_000);
    expect(followsChannel(r.shape)).toBe(true);
    expect(r.shape.faults.map((f) => f.kind)).toEqual([
      "relay-cut",
      "agent-kill",
      "bad-release",
      "agent-kill",
    ]);
    // Stopped, then recalled (and the recall shown), the revert ended, the fix published.
    const bad = r.applied.find((l) => l.includes("panics")) ?? "";
    expect(bad).toContain(`: done (${BAD_VERSION} published and stopped: `);
    expect(bad).toMatch(/recalled, shown [\d.]+ s after/);
    expect(bad).toContain(`fix ${FIX_VERSION} published)`);
    expectClean(r, FIX_VERSION);
  });
});
