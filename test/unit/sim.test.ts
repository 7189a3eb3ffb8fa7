// The simulation's slice in the unit tier: a seed replays exactly (the same schedule, the same
// violations), and shrinking keeps only faults the violation needs.
import { describe, expect, it } from "vitest";
import { runSeed, shapeOf } from "../../src/sim/run.js";
import { drawFaults } from "../../src/sim/faults.js";
import { rngOf } from "../../src/sim/rng.js";

describe("simulate", () => {
  it("a seed replays exactly", () => {
    const a = runSeed(4);
    const b = runSeed(4);
    expect(b.faults).toEqual(a.faults);
    expect(b.violations).toEqual(a.violations);
  }, 60_000);

  it("draws the same shape and schedule from a seed", () => {
    expect(shapeOf(7)).toEqual(shapeOf(7));
    expect(drawFaults(rngOf(9), 5, 300)).toEqual(drawFaults(rngOf(9), 5, 300));
    expect(shapeOf(7)).not.toEqual(shapeOf(8));
  });

  it("every undoable fault is drawn with its undo", () => {
    const f = drawFaults(rngOf(3), 50, 300);
    const count = (k: string): number => f.filter((x) => x.kind === k).length;
    expect(count("wake-operator")).toBe(count("pause-operator"));
    expect(count("start-agent")).toBe(count("kill-agent"));
    expect(count("net-heal")).toBe(count("net-cut"));
  });
});
