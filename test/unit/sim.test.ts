// The simulation's slice in the unit tier: a seed replays exactly (the same schedule, the same
// violations), a sweep of seeds keeps every rule, and each rule broken by hand is found.
import { describe, expect, it } from "vitest";
import { runSeed, shapeOf } from "../../src/sim/run.js";
import { runSeeds } from "../../src/sim/pool.js";
import { runWorld } from "../../src/sim/world.js";
import { MUTANTS, type Mutant } from "../../src/sim/mutants.js";
import type { Rule } from "../../src/invariants/index.js";
import { CHANNEL_DRAWN, drawFaults } from "../../src/sim/faults.js";
import { rngOf } from "../../src/sim/rng.js";

describe("simulate", () => {
  it("a seed replays exactly", () => {
    const a = runSeed(4);
    const b = runSeed(4);
    expect(b.faults).toEqual(a.faults);
    expect(b.violations).toEqual(a.violations);
  }, 60_000);

  it("a seed of the channel world replays exactly, and follows the channel", () => {
    const { shape, faults } = shapeOf(12);
    expect(shape.channel).toBeDefined();
    const a = runWorld(12, shape, faults, undefined).history;
    expect(runWorld(12, shape, faults, undefined).history).toEqual(a);
    const last = a.filter((o) => o.kind === "cluster").at(-1);
    expect(last?.kind === "cluster" && last.cluster.status?.trust?.taken).toBeTruthy();
  }, 60_000);

  it("a seed's whole history is the same on every run, and on any thread", async () => {
    const history = (seed: number) => {
      const { shape, faults } = shapeOf(seed);
      return runWorld(seed, shape, faults, undefined).history;
    };
    expect(history(9)).toEqual(history(9));
    const seeds = [3, 9, 12];
    expect(await runSeeds(seeds, 2)).toEqual(await runSeeds(seeds, 1));
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
    const ch = drawFaults(rngOf(3), 50, 300, CHANNEL_DRAWN);
    const chCount = (k: string): number => ch.filter((x) => x.kind === k).length;
    expect(chCount("channel-heal")).toBe(chCount("channel-cut"));
    expect(chCount("resume-signing")).toBe(chCount("stop-signing"));
    expect(chCount("operator-clock-fixed")).toBe(chCount("operator-clock-ahead"));
  });

  // The slice of the sweep in `npm test`: every seed checked, none may break a rule. What fits
  // in about 20 s on the shared 2-core machine (0.2 s a seed of CPU, more under load,
  // 2026-12-04); the rest on demand: `npm run simulate -- --seeds 100000 --workers N`. Seeds 8,
  // 9, 12, 17, 18 and 19 broke the budget until a fallback kept its turn until its Node
  // rejoined (steps.ts giveBack); 433 and 889 (outside the slice) until Overtaken.
  const SWEEP = 60;
  it(`seeds 1-${SWEEP}: no rule broken`, async () => {
    const seeds = Array.from({ length: SWEEP }, (_, i) => i + 1);
    const broken = (await runSeeds(seeds, 1)).flatMap((r) =>
      r.violations
        .slice(0, 1)
        .map(
          (v) =>
            `seed ${r.seed} broke ${v.rule} at ${v.at} ms: ${v.message}; replay: ` +
            `npm run simulate -- --seed ${r.seed}${v.machine ? ` --trace ${v.machine}` : ""}`,
        ),
    );
    expect(broken).toEqual([]);
  }, 120_000);

  // Seeds found outside the sweep by `npm run simulate` (issue 48): 71742 broke the budget with
  // a turn taken back after its drain began (the status announcing the drain failed, so the
  // operator judged it not started and gave the slot to a leader: 4 down on a budget of 3);
  // 71702 with a checker that counted Lost from the recorded step past the heartbeat's return;
  // 70695 and 90014 with a drain announced (stored) and a machine marked Lost the same second,
  // the drain beginning a second later into a full budget (now paused: operator turns/paused.ts).
  it.each([71742, 71702, 70695, 90014])(
    "seed %i: no rule broken",
    (seed) => {
      expect(runSeed(seed).violations).toEqual([]);
    },
    60_000,
  );

  // Each safety rule broken by hand is noticed: the seed `npm run simulate -- --mutants` found
  // first, the rule it broke there, and the same seed clean without the break.
  // Since 40 % of the seeds follow a signed channel (issue 38), seed 35 is a channel world and
  // the unconditioned write is found first at seed 66, dropping a revert (last writer wins).
  const MUTANT_ROWS: [Mutant, number, Rule][] = [
    ["unconditioned", 66, "revert-dropped"],
    ["leader", 1, "two-leaders"],
    ["grace", 1, "grant-in-grace"],
    ["arm-first", 1, "boot-unverified-slot"],
    ["bootid", 14, "promote-without-rejoin"],
    ["recall-blind", 19, "grant-withdrawn"],
    ["taken-blind", 12, "below-taken"],
    ["revert-forgotten", 12, "revert-dropped"],
    // A machine whose certificate lapsed never rejoins (issue 38, 2.7 before its fix).
    ["never-rejoins", 5, "lost-lapsed"],
  ];
  /** The bound `--mutants` is run with: every rule broken by hand is found within it. */
  const MUTANT_BOUND = 100;
  it("finds every mutant within the bound", () => {
    expect(MUTANT_ROWS.map(([m]) => m).sort()).toEqual([...MUTANTS].sort());
    expect(MUTANT_ROWS.filter(([, seed]) => seed > MUTANT_BOUND)).toEqual([]);
  });

  it.each(MUTANT_ROWS)(
    "the %s mutant breaks seed %i (%s)",
    (mutant, seed, rule) => {
      expect(runSeed(seed, mutant).violations.map((v) => v.rule)).toContain(rule);
      expect(runSeed(seed).violations).toEqual([]);
    },
    60_000,
  );
});
