// The slice of `npm run torture` in `npm test`: one short run of real processes (the lab's
// control plane, two operator copies, four agents with file slots, each behind its relay)
// under seed 9's faults: two power cuts of a machine whose agent begins the read-back before
// the arm, a kill and restart of kube-apiserver, an operator copy paused for 30 s. The independent watcher's history must pass every rule
// of the invariant checker, and the fleet must converge on the target.
import { describe, expect, it } from "vitest";
import { describeFault } from "../../src/torture/schedule.js";
import { runTorture, violationReport } from "../../src/torture/run.js";

/** Seed 9 with four machines: budget 1 (a broken budget check shows at once), three fault kinds. */
const SEED = 9;

describe("npm run torture (one short run)", () => {
  it("keeps every safety rule under seed 9's faults and converges", async () => {
    const lines: string[] = [];
    const r = await runTorture({
      seed: SEED,
      machines: 4,
      durationMs: 40_000,
      log: (l) => lines.push(l),
    });
    expect(r.shape.faults.map(describeFault)).toEqual([
      "+5.7s power cut of the first machine whose agent begins the read-back before the arm",
      "+10.5s power cut of the first machine whose agent begins the read-back before the arm",
      "+27.9s SIGKILL kube-apiserver, restarted after 1775 ms",
      "+37.5s SIGSTOP operator-2 for 29605 ms",
    ]);
    const report = r.violations.flatMap((v) => violationReport(r, v)).join("\n");
    expect(report, `violations (faults applied: ${r.applied.join("; ")})`).toBe("");
    expect(r.unconverged, "machines not Ready on the target at the deadline").toEqual([]);
  });
});
