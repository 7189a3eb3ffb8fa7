// The failure brake, pure: how many machines failed their trial of the Cluster's target, and
// whether that many stops the rollout (spec.rollout.maxFailedTrials). A release that panics
// on boot must cost one machine's drain and fallback, not the whole fleet's.
//
// What counts as a failed trial of the target: the machine's last trial names exactly the
// target (version and digest) and did not succeed (it fell back, its slot check did not
// match, it was not proven in time, a health gate failed, the bootloader did not take it),
// or the machine lists the target
// among its failedReleases (it will not try it again). An Inconclusive trial (the trial boot
// could not read the API server or its Node for its whole prove deadline, or the target changed
// meanwhile) is not a failure: a failure to look is no verdict on the release, and the machine
// tries it again. Trials of other releases never count,
// so a retarget starts from the failures of the new target only. Failures a person accepted
// with `liken rollout resume CLUSTER --failed-release` (for exactly this release) no longer
// count.
import type { Cluster, Machine, ReleaseRef } from "../../api/index.js";
import { truncate } from "../../api/bounds.js";

/** The page's default: the first failed trial stops the release. */
export const DEFAULT_MAX_FAILED_TRIALS = 1;

export interface FailedTrial {
  machine: string;
  /**
   * CamelCase, from the agent: TrialFellBack, SlotCheckMismatch, HealthCheckFailed,
   * TrialNotTaken (the bootloader booted the old slot without starting the trial), ...
   */
  reason: string;
  message?: string;
  at: string;
}

export interface BrakeView {
  /** Every machine whose trial of the target failed. */
  failed: FailedTrial[];
  /** Those not accepted by a person's resume: these count against the limit. */
  counted: FailedTrial[];
  /** spec.rollout.maxFailedTrials (0: the brake is off). */
  limit: number;
  /** Whether no further turn may be granted for the target. */
  held: boolean;
}

const same = (a: ReleaseRef, b: ReleaseRef): boolean =>
  a.version === b.version && a.digest === b.digest;

export function failedTrialOf(m: Machine, target: ReleaseRef): FailedTrial | undefined {
  const s = m.status ?? {};
  const t = s.lastTrial;
  if (
    t !== undefined &&
    same(t, target) &&
    t.result !== "Succeeded" &&
    t.result !== "Inconclusive"
  ) {
    return {
      machine: m.metadata.name,
      reason: t.reason,
      at: t.at,
      ...(t.message === undefined ? {} : { message: t.message }),
    };
  }
  const f = s.failedReleases?.find((x) => same(x, target));
  return f === undefined ? undefined : { machine: m.metadata.name, reason: f.reason, at: f.at };
}

export function brakeOf(
  cluster: Cluster,
  machines: readonly Machine[],
  target: ReleaseRef | undefined,
): BrakeView {
  const limit = cluster.spec.rollout?.maxFailedTrials ?? DEFAULT_MAX_FAILED_TRIALS;
  if (target === undefined) return { failed: [], counted: [], limit, held: false };
  const failed = machines
    .flatMap((m) => failedTrialOf(m, target) ?? [])
    .sort((a, b) => (a.at < b.at ? -1 : a.at > b.at ? 1 : a.machine < b.machine ? -1 : 1));
  const resume = cluster.spec.rollout?.failedReleaseResume;
  const accepted = new Set(resume !== undefined && same(resume, target) ? resume.machines : []);
  const counted = failed.filter((f) => !accepted.has(f.machine));
  return { failed, counted, limit, held: limit > 0 && counted.length >= limit };
}

/** Each failure's message in failedList: ten of them, with names and times, use ~6 KiB of a 32 KiB message. */
const FAILURE_MESSAGE_MAX = 256;

/** "node-1 (TrialFellBack: ...), node-2 (SlotCheckMismatch)", for the condition and the CLI. */
export function failedList(failed: readonly FailedTrial[]): string {
  const shown = failed.slice(0, 10).map((f) => {
    // A trial's message may be its whole 4096 characters; ten of them would not fit the
    // condition's message. The Machine's status.lastTrial keeps each whole.
    const why = f.message ? `${f.reason}: ${truncate(f.message, FAILURE_MESSAGE_MAX)}` : f.reason;
    return `${f.machine} (${why}, at ${f.at})`;
  });
  const more = failed.length > 10 ? ` and ${failed.length - 10} more` : "";
  return shown.join(", ") + more;
}

/**
 * The first trials of a release no machine has proven yet: at most (limit - counted failures)
 * machines try it at a time, a trial in flight included, so that with a budget of several
 * turns a bad release is still tried by no more machines than the brake allows to fail.
 * Undefined when the cap does not apply: the brake is off (limit 0), there is no target, or a
 * machine proved the target (its trial succeeded, or it runs it and is Ready), after which the
 * budget alone decides.
 */
export interface FirstTrialCap {
  /** How many more turns for the target may be granted now (0: wait for the trials). */
  left: number;
  /** The machines holding a turn for the target: its trials in flight. */
  trying: string[];
  limit: number;
  /** The failures that count (brake.counted). */
  failed: number;
}

export function firstTrialCap(
  brake: BrakeView,
  machines: readonly Machine[],
  turns: readonly { machine: string; version: string; digest?: string }[],
  target: ReleaseRef | undefined,
): FirstTrialCap | undefined {
  if (target === undefined || brake.limit <= 0) return undefined;
  if (machines.some((m) => proves(m, target))) return undefined;
  const trying = turns
    .filter((t) => t.version === target.version && (t.digest ?? target.digest) === target.digest)
    .map((t) => t.machine);
  const failed = brake.counted.length;
  return {
    left: Math.max(0, brake.limit - failed - trying.length),
    trying,
    limit: brake.limit,
    failed,
  };
}

/**
 * The machine proved the target: its trial of exactly the target succeeded, or it runs the
 * target and is Ready (a trial boot reports Updating until it is promoted, so it does not
 * count before that).
 */
export function proves(m: Machine, target: ReleaseRef): boolean {
  const s = m.status ?? {};
  if (
    s.lastTrial !== undefined &&
    same(s.lastTrial, target) &&
    s.lastTrial.result === "Succeeded"
  ) {
    return true;
  }
  return (
    s.step === "Ready" &&
    s.version === target.version &&
    (s.digest === undefined || s.digest === target.digest)
  );
}
