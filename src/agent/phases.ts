// The agent's phases and their timeouts: the closed union of phases decide() names, the
// timeout each phase keeps (with where each default comes from), and the one place a timeout
// is read. Apart from the decisions so the config (config.ts) and the actions (act.ts) read
// the timeouts without the rules.

export const PHASES = [
  /** Runs the target, or there is none. */
  "Idle",
  /** The API server cannot be read: keep serving, change nothing that needs a turn. */
  "Disconnected",
  /** The other slot holds (or is being written with) a release that is not the target. */
  "Withdrawing",
  "Downloading",
  /** Staged; rebootPolicy Manual and no approval for this release. */
  "AwaitingApproval",
  /** Staged; asked for a turn; the record is not in status.rebootTurns yet. */
  "AwaitingTurn",
  "Draining",
  /** Read back the slot against the staged release, then arm the trial (or skip it), reboot. */
  "CheckingSlot",
  /** A trial armed and a turn held: the reboot is due (after a crash or SIGTERM in between). */
  "Rebooting",
  /** Booted as the trial: wait for the API and node Ready, then make the slot the default. */
  "Proving",
  /** Back on the old slot after the bootloader fell back: report, remember, give back. */
  "FallingBack",
  /**
   * A later boot of the old slot with the trial still not started: the bootloader did not take
   * it. Report, remember, disarm, give back; never reboot for it again.
   */
  "TrialNotTaken",
  /**
   * A later boot of the old slot, the trial recorded but never shown armed (a power cut or a
   * failed arm): no verdict on the release. Count it, disarm, arm again within the turn; after
   * MAX_ARM_ATTEMPTS (arming.ts) give the turn back and hold, the release not failed.
   */
  "TrialNotArmed",
  /** The target release failed here (trial or slot check); not retried until it changes. */
  "Failed",
  /**
   * Still holding the turn it drained for, back from a reboot that ended in no promotion (a
   * fallback, a trial not taken or not armed, a skipped trial, a retarget): the turn goes back
   * only once its Node shows this boot Ready (giveBack).
   */
  "Rejoining",
] as const;
export type Phase = (typeof PHASES)[number];

/** Every timeout the agent keeps, in milliseconds; the config file can shorten them (tests). */
export interface Timeouts {
  /** A download that makes no progress this long is aborted and retried. */
  downloadMs: number;
  /** Wait this long after a failed download before trying again. */
  downloadRetryMs: number;
  /** Cordon to last pod gone; at the deadline the node stays cordoned and the turn held. */
  drainMs: number;
  /** Read-back of the slot before the trial. */
  slotCheckMs: number;
  /** The reboot command ran and the machine still runs: report that the reboot failed. */
  rebootMs: number;
  /** From the trial boot until the agent, the API and node Ready; then reboot to fall back. */
  proveMs: number;
}

/**
 * The defaults, and where each number comes from:
 * - download 10 min without progress: the fetch layer's idle timeout is 30 s per request; ten
 *   minutes of retries without a byte means the channel is gone, not slow;
 * - drain 1 h: kubectl drain has no default; one hour covers PDB-limited StatefulSets that
 *   roll one pod at a time (minutes each) without leaving a stuck drain forever;
 * - slot check 10 min: reading a few GiB back at ~100 MiB/s with room for slow media;
 * - reboot 10 min: systemd's default JobTimeoutSec for reboot.target is 30 min, but a
 *   machine that still runs after 10 is worth a report;
 * - prove 15 min: firmware POST on servers takes 2-5 min, plus kubelet registration.
 */
export const DEFAULT_TIMEOUTS: Timeouts = {
  downloadMs: 10 * 60_000,
  downloadRetryMs: 60_000,
  drainMs: 60 * 60_000,
  slotCheckMs: 10 * 60_000,
  rebootMs: 10 * 60_000,
  proveMs: 15 * 60_000,
};

/** The named timeout of each phase (null: the phase waits for people or for the target). */
export const PHASE_TIMEOUT = {
  Idle: null,
  Disconnected: null,
  Withdrawing: null,
  Downloading: "downloadMs",
  AwaitingApproval: null,
  AwaitingTurn: null,
  Draining: "drainMs",
  CheckingSlot: "slotCheckMs",
  Rebooting: "rebootMs",
  Proving: "proveMs",
  FallingBack: null,
  TrialNotTaken: null,
  TrialNotArmed: null,
  Failed: null,
  // No deadline of its own: a machine that never rejoins keeps its turn and the operator
  // reports the rollout stalled on it, rather than letting one more machine go down.
  Rejoining: null,
} as const satisfies Record<Phase, keyof Timeouts | null>;

/** The phases that have a timeout. */
export type TimedPhase = {
  [P in Phase]: (typeof PHASE_TIMEOUT)[P] extends null ? never : P;
}[Phase];

/** The named timeout of a phase in milliseconds: the one place a timeout is read. */
export function phaseTimeoutMs(phase: TimedPhase, t: Timeouts): number {
  return t[PHASE_TIMEOUT[phase]];
}

function isTimed(phase: Phase): phase is TimedPhase {
  return PHASE_TIMEOUT[phase] !== null;
}

/** The elapsed time of a phase against its named timeout. */
export function timedOut(
  phase: Phase,
  since: number | undefined,
  now: number,
  t: Timeouts,
): boolean {
  return isTimed(phase) && since !== undefined && now - since >= phaseTimeoutMs(phase, t);
}
