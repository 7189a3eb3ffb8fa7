// The slice of `npm run torture` in `npm test`: one short run of real processes (the lab's
// control plane, two operator copies, four agents with file slots) under seed 8's faults, a
// kill and restart of an operator copy, of kube-apiserver, and a power cut of a machine while
// it checks its slot before the arm. The independent watcher's history must pass every rule
// of the invariant checker, and the fleet must converge on the target.
import { describe, expect, it } from "vitest";
import { describeFault } from "../../src/torture/schedule.js";
import { runTorture, violationReport } from "../../src/torture/run.js";

/** Seed 8 with four machines: budget 1 (a broken budget check shows at once) and three fault kinds. */
const SEED = 8;

describe("npm run torture (one short run)", () => {
  it("keeps every safety rule under seed 8's faults and converges", async () => {
    const lines: string[] = [];
    const r = await runTorture({
      seed: SEED,
      machines: 4,
      durationMs: 40_000,
      log: (l) => lines.push(l),
    });
    expect(r.shape.faults.map(describeFault)).toEqual([
      "+2.4s SIGKILL operator-1, restarted after 3063 ms",
      "+12.0s SIGKILL kube-apiserver, restarted after 3133 ms",
      "+18.0s power cut node-1 once it is CheckingSlot",
    ]);
    const report = r.violations.flatMap((v) => violationReport(r, v)).join("\n");
    expect(report, `violations (faults applied: ${r.applied.join("; ")})`).toBe("");
    expect(r.unconverged, "machines not Ready on the target at the deadline").toEqual([]);
  });
});
