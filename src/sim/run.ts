// One seed: its shape and faults drawn, the world run, the history checked; and the shrink
// of a violating schedule (remove one fault at a time while the same rule still breaks).
import { START_GRACE_SECONDS } from "../api/index.js";
import { checkHistory, type Rule, type Violation } from "../invariants/index.js";
import { CHANNEL_DRAWN, drawFaults, IDENTITY_DRAWN, type Fault } from "./faults.js";
import type { Mutant } from "./mutants.js";
import { rngOf } from "./rng.js";
import { runWorld, V2, V3, type RunShape } from "./world.js";

export interface SeedRun {
  seed: number;
  shape: RunShape;
  faults: Fault[];
  violations: Violation[];
}

/** Machines per run: the 20-200; most runs small, so many seeds fit in minutes. */
export function shapeOf(seed: number): { shape: RunShape; faults: Fault[] } {
  const rng = rngOf(seed);
  const machines = rng.chance(0.1) ? rng.int(50, 200) : rng.int(20, 40);
  // A budget of 10-25 % of the fleet, as fleets set it (spec.disruption.maxUnavailable).
  const maxUnavailable = Math.max(1, Math.round((machines * rng.int(10, 25)) / 100));
  // Faults in the first 5 virtual minutes; then the fleet converges, a turn taking about a
  // minute here (reboot 10-40 s, the kubelet 2-15 s), plus the 40 s start grace and room for
  // retries. A settled fleet ends the run early.
  const healAt = 300;
  const seconds = healAt + 120 + Math.ceil(machines / maxUnavailable) * 90;
  const shape: RunShape = {
    machines,
    leaders: rng.int(0, 5),
    operators: rng.int(1, 3),
    maxUnavailable,
    seconds,
    healAt,
    badBoot: rng.chance(0.2) ? [`sha256:${"2".repeat(64)}`] : [],
  };
  // Certificate lapses from a stream of their own: each seed's other draws stay as they were.
  const ids = rngOf(seed ^ 0xce27);
  const lapses = ids.chance(0.3) ? drawFaults(ids, ids.int(1, 3), healAt, IDENTITY_DRAWN) : [];
  const faults = [...drawFaults(rng, rng.int(0, 12), healAt), ...lapses].sort(
    (a, b) => a.at - b.at,
  );
  // Drawn after the pinned world's draws, so a pinned seed keeps its shape and schedule: 40 %
  // of the seeds follow a signed channel, with its faults beside the others.
  if (!rng.chance(0.4)) return { shape, faults };
  shape.channel = {
    acceptExpiredSeconds: rng.pick([0, 0, 60, 600]),
    maxFailures: rng.int(1, 2),
  };
  shape.badBoot = rng.chance(0.4) ? [rng.pick([V2, V3]).digest] : [];
  const more = drawFaults(rng, rng.int(1, 8), healAt, CHANNEL_DRAWN);
  return { shape, faults: [...faults, ...more].sort((a, b) => a.at - b.at) };
}

export function runSeed(seed: number, mutant?: Mutant, faults?: readonly Fault[]): SeedRun {
  const drawn = shapeOf(seed);
  const schedule = [...(faults ?? drawn.faults)];
  const { history } = runWorld(seed, drawn.shape, schedule, mutant);
  const violations = checkHistory(history, {
    startGraceMs: START_GRACE_SECONDS * 1000,
    leases: true,
  });
  return { seed, shape: drawn.shape, faults: schedule, violations };
}

/** The shortest schedule found that still breaks `rule`: drop each fault once, keep drops. */
export function shrink(seed: number, rule: Rule, mutant?: Mutant): Fault[] {
  let faults = shapeOf(seed).faults;
  let changed = true;
  while (changed) {
    changed = false;
    for (let i = 0; i < faults.length; i++) {
      const fewer = faults.filter((_, j) => j !== i);
      if (runSeed(seed, mutant, fewer).violations.some((v) => v.rule === rule)) {
        faults = fewer;
        changed = true;
        break;
      }
    }
  }
  return faults;
}

/**
 * The first seed (1..limit) on which the mutant breaks a rule that the unbroken code keeps on
 * the same seed (a finding of the unbroken code must not count for a mutant).
 */
export function findMutant(
  mutant: Mutant,
  limit: number,
): { seed: number; rule: Rule; message: string } | undefined {
  for (let seed = 1; seed <= limit; seed++) {
    const broken = runSeed(seed, mutant).violations;
    if (broken.length === 0 || runSeed(seed).violations.length > 0) continue;
    return { seed, rule: broken[0]!.rule, message: broken[0]!.message };
  }
  return undefined;
}
