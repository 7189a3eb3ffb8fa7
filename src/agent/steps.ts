// The agent's state machine as data: a closed union of phases, a named timeout per phase, and
// one pure function `decide(observed, timeouts)` that says which phase the machine is in and the
// single next action. The daemon (daemon.ts) only observes, calls decide, and performs the
// action; every rule of the page's section 3 lives here and is table-tested.
//
// Must never (the invariant): reboot without a recorded turn for the staged release; arm a trial
// of a slot that is not staged for the target (the slot check itself runs inside the
// "check-and-reboot" action, right before arming); leave the machine with no bootable default
// (the default slot only changes in "promote", after the trial boot rejoined).
import type { BootVerdict, Slot } from "../bootloader/types.js";
import { approves } from "../coordinator/turn.js";
import { armHold, type NoVerdictSeen } from "./arming.js";
import type { GiveUpReason } from "./give-up.js";
import { gateStep, healthGiveUp, type HealthSeen } from "./health.js";
import { bootIdText, rejoinOf, type NodeSeen, type Rejoin } from "./rejoin.js";
import {
  sameRelease,
  type Approval,
  type AgentStep,
  type ReleaseRef,
  type RebootPolicy,
  type UpdateStage,
} from "../api/types.js";

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

/** A slot as the slot store's marker describes it. */
export interface SlotView {
  slot: Slot;
  state: "empty" | "withdrawn" | "writing" | "staged";
  release?: ReleaseRef;
}

/** Everything decide() looks at, gathered by the daemon at one moment. */
export interface Observed {
  /** Milliseconds since boot (clock.ts): every time below is on this clock, never the wall's. */
  now: number;
  /** False when the last read of the Cluster/Machine failed. */
  apiReachable: boolean;
  /** The bootloader's verdict combined with the running slot. */
  boot: BootVerdict;
  /** The slot running now and what it holds. */
  running: SlotView;
  /** The slot not running (where downloads go). */
  other: SlotView;
  /** The Cluster's spec.version with its catalog digest; undefined when there is none. */
  target: ReleaseRef | undefined;
  policy: RebootPolicy;
  /** machine.spec.approval: decide() applies it to the release staged in `other`. */
  approval: Pick<Approval, "version" | "digest"> | undefined;
  /** status.rebootTurns holds a record for this machine and the release staged in `other`. */
  turn: boolean;
  /** A download in progress (it runs beside the loop) and what it writes. */
  download: ReleaseRef | undefined;
  /** Since when the running download wrote no new byte (undefined: none running). */
  downloadIdleSince: number | undefined;
  /** The last download failure of the target and when. */
  downloadFailedAt: number | undefined;
  /** Digests this machine must not try again (failed trial or slot check). */
  failedDigests: readonly string[];
  /** The drain finished for this staged digest during the current turn. */
  drainedDigest: string | undefined;
  /**
   * A drain began for this digest (recorded before the first cordon) and the turn has not been
   * given back since: the node may be cordoned and partly drained even if the drain never
   * finished (the agent killed, the turn taken back mid-drain). Absent: nothing begun.
   */
  drainBegunDigest?: string;
  /**
   * The grantedAt of a turn taken back from this machine (Cluster status.takenBackTurns), which
   * the operator counts as down until this machine's status says it did not act on it.
   */
  turnTakenBack?: string;
  /**
   * The staged release's boot files are still to be installed (systemd-boot: its kernel and
   * initrd on the ESP; memory's bootFiles names another release or slot). Absent: none due.
   */
  bootFilesDue?: boolean;
  /** The Node's name (the agent's config). */
  nodeName: string;
  /** The Node as read (rejoin.ts); undefined: not read (see nodeUnread) or no such Node. */
  node: NodeSeen | undefined;
  /** Why the Node could not be read: then there is no look, and no verdict. */
  nodeUnread: string | undefined;
  /** When this boot started on the wall clock (ms): a Ready heartbeat must be later. */
  bootStartedAt: number;
  /** On a trial boot: the bootIDs its Node showed so far (memory), to name them on giving up. */
  nodeBootIds?: readonly string[];
  /** When this boot was first seen as a trial boot (for the prove timeout). */
  trialSeenAt: number | undefined;
  /** On a trial boot: the health gates and their last check (health.ts); absent: none. */
  health?: HealthSeen;
  /** This boot's identity (the kernel's boot_id): a new boot, or the agent restarted in this one. */
  bootId: string;
  /**
   * The trial the agent armed and has not seen through (memory), and the boot it was armed in
   * (undefined: armed by an agent that did not record it, so never judged not taken); `shown`:
   * the bootloader read back armed for it (false: only the intent was recorded).
   */
  armedTrial: { slot: Slot; bootId: string | undefined; shown: boolean } | undefined;
  /** The last trial that ended without a verdict (memory's noVerdict), for the arming bound. */
  noVerdict?: NoVerdictSeen;
}

export type Action =
  | { kind: "wait" }
  | { kind: "withdraw"; slot: Slot }
  /** Stop the download child; `failed`: count it as a failed attempt (retry after a delay). */
  | { kind: "cancel-download"; failed: boolean }
  | { kind: "download"; slot: Slot; release: ReleaseRef }
  | { kind: "request-turn"; release: ReleaseRef }
  /** The staged release's boot files to where the bootloader loads them (before any turn). */
  | { kind: "install-boot-files"; slot: Slot; release: ReleaseRef }
  | { kind: "drain"; release: ReleaseRef }
  | { kind: "check-and-reboot"; slot: Slot; release: ReleaseRef }
  /** `failure`: on a trial boot, the reason the report after the fallback gives (give-up.ts). */
  | { kind: "reboot"; reason: string; failure?: GiveUpReason }
  /** Run the health gates of the trial boot (health-run.ts); the next look sees the result. */
  | { kind: "check-health" }
  | { kind: "disarm"; reason: string }
  | { kind: "promote"; slot: Slot }
  | { kind: "fall-back-report"; slot: Slot }
  /** The bootloader did not take the trial of `slot`: remember, disarm, report (no reboot). */
  | { kind: "not-taken-report"; slot: Slot }
  /** The trial of `slot` was never shown armed: count it (not a failure), disarm, no reboot. */
  | { kind: "not-armed-report"; slot: Slot }
  /** Give the turn back and undo liken's cordon (the machine serves again without a reboot). */
  | { kind: "release-turn"; reason: string };

export interface Decision {
  phase: Phase;
  action: Action;
  /** The STATUS word (section 4 of the page). */
  step: AgentStep;
  stage?: UpdateStage;
  /** Whether status.turnRequest names the staged release (asked for or held). */
  wantsTurn: boolean;
  /** Why, for logs and the status message. */
  why: string;
}

const WAIT: Action = { kind: "wait" };

function d(
  phase: Phase,
  step: AgentStep,
  action: Action,
  why: string,
  extra: { stage?: UpdateStage; wantsTurn?: boolean } = {},
): Decision {
  return {
    phase,
    step,
    action,
    why,
    wantsTurn: extra.wantsTurn ?? false,
    ...(extra.stage ? { stage: extra.stage } : {}),
  };
}

/**
 * Gives a held turn back (uncordon, forget the drain) only once the machine is back: its Node
 * shows THIS boot Ready since it (rejoin.ts), the same evidence a promotion needs. Until then
 * the machine is still down as the budget counts it, so its status keeps the operator from
 * releasing the turn (step Updating, stage Rejoining) and granting it to the next machine: a
 * fallback reported at once freed the budget while the old slot's kubelet was still starting,
 * one machine more down than allowed (found by `npm run simulate`, docs/simulation.md). A
 * drain with no reboot since passes at once: the Node still shows this boot, Ready.
 */
function giveBack(o: Observed, phase: Phase, step: AgentStep, reason: string): Decision {
  const r = rejoinOf(o);
  if (r.kind === "rejoined") return d(phase, step, { kind: "release-turn", reason }, reason);
  return rejoining(`${reason}; the turn is kept until this boot rejoins: ${r.why}`);
}

/** The status of a machine that holds its turn until it rejoins (giveBack). */
function rejoining(why: string, action: Action = WAIT): Decision {
  return d("Rejoining", "Updating", action, why, { stage: "Rejoining" });
}

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

/**
 * The trial boot: prove it within proveMs (its Node shows THIS boot, Ready since it: rejoin.ts;
 * then every health gate), else reboot without promoting: the bootloader boots the old default.
 * A release that is no longer the target is never promoted: the machine falls back at once.
 */
function decideOnTrial(o: Observed, slot: Slot, t: Timeouts): Decision {
  const stage = { stage: "Proving" as const, wantsTurn: true };
  const running = o.running.release;
  if (o.apiReachable && o.target !== undefined && running !== undefined) {
    if (!sameRelease(running, o.target)) {
      // The turn is still held, so this reboot is covered; not a verdict on the release.
      const reason =
        `trial of ${running.version} in slot ${slot}: the Cluster's target is now ` +
        `${o.target.version}; not promoted, falling back`;
      const action: Action = { kind: "reboot", reason, failure: "TargetChanged" };
      return d("Proving", "Updating", action, reason, stage);
    }
  }
  const rejoin = rejoinOf(o);
  if (rejoin.kind === "rejoined") return decideGates(o, slot, t);
  if (timedOut("Proving", o.trialSeenAt, o.now, t)) {
    // The turn is still held (its record stays until we give it back), so this reboot is
    // covered; next_entry was consumed, so the bootloader boots the old default.
    const { reason, failure } = notRejoined(o, slot, t, rejoin);
    return d("Proving", "Updating", { kind: "reboot", reason, failure }, reason, stage);
  }
  return d("Proving", "Updating", WAIT, `waiting for the trial to rejoin: ${rejoin.why}`, stage);
}

/**
 * Why a trial that did not rejoin in time is given up: a verdict (NodeNotRejoined) when its
 * Node was read at least once on this boot, else no verdict (TrialUnobserved): a failure to
 * look for the whole deadline says nothing about the release.
 */
export function notRejoined(
  o: Pick<Observed, "nodeBootIds" | "nodeName" | "bootId">,
  slot: Slot,
  t: Pick<Timeouts, "proveMs">,
  rejoin: Exclude<Rejoin, { kind: "rejoined" }>,
): { reason: string; failure: GiveUpReason } {
  const within = `trial of slot ${slot} did not rejoin within ${t.proveMs} ms`;
  const seen = o.nodeBootIds ?? [];
  if (rejoin.kind === "unread" && seen.length === 0) {
    return {
      reason: `${within}: never read Node ${o.nodeName} (${rejoin.why}); no verdict on the release`,
      failure: "TrialUnobserved",
    };
  }
  const ids = seen.map(bootIdText).join(", ");
  const reason =
    rejoin.kind === "not-rejoined"
      ? `${within}: ${rejoin.why} (bootIDs it showed on this boot: ${ids || "(none)"})`
      : `${within}: ${rejoin.why}; earlier Node ${o.nodeName} showed bootID ${ids}, ` +
        `this boot is ${o.bootId}`;
  return { reason, failure: "NodeNotRejoined" };
}

/** The trial rejoined: promote once every health gate passed, within the same deadline. */
function decideGates(o: Observed, slot: Slot, t: Timeouts): Decision {
  const stage = { stage: "Proving" as const, wantsTurn: true };
  const gates = gateStep(o.health, o.now);
  if (gates.kind === "passed") {
    const why = o.health?.gates.length
      ? "the trial rejoined and every health gate passed"
      : "the trial rejoined";
    return d("Proving", "Updating", { kind: "promote", slot }, why, stage);
  }
  if (timedOut("Proving", o.trialSeenAt, o.now, t)) {
    // As for a trial that does not rejoin: the turn is still held; no promotion, so the
    // bootloader boots the old default.
    const reason = healthGiveUp(slot, t.proveMs, gates);
    const action: Action = { kind: "reboot", reason, failure: "HealthCheckFailed" };
    return d("Proving", "Updating", action, reason, stage);
  }
  if (gates.kind === "check")
    return d("Proving", "Updating", { kind: "check-health" }, gates.why, stage);
  return d("Proving", "Updating", WAIT, gates.why, stage);
}

/** A trial armed but not booted: reboot only with the turn, else withdraw the trial. */
function decideArmed(o: Observed, slot: Slot): Decision {
  const staged = o.other.state === "staged" && o.other.slot === slot ? o.other.release : undefined;
  if (!o.apiReachable) {
    return d(
      "Rebooting",
      "Updating",
      WAIT,
      "trial armed; API unreachable: no reboot without a turn",
      {
        stage: "Rebooting",
        wantsTurn: true,
      },
    );
  }
  if (staged === undefined || !sameRelease(staged, o.target)) {
    const reason = "the armed trial no longer matches the target";
    return d("Withdrawing", "Updating", { kind: "disarm", reason }, reason);
  }
  if (o.failedDigests.includes(staged.digest)) {
    // Recorded as failed (a trial not taken, after a crash before its disarm): never reboot
    // into it again.
    const reason = `the armed trial of ${staged.version} failed here before`;
    return d("Failed", "Failed", { kind: "disarm", reason }, reason);
  }
  if (!o.turn) {
    const reason = "trial armed but no turn is recorded for it";
    return d("AwaitingTurn", "UpdatePending", { kind: "disarm", reason }, reason, {
      wantsTurn: true,
    });
  }
  return d("Rebooting", "Updating", { kind: "reboot", reason: "trial armed" }, "trial armed", {
    stage: "Rebooting",
    wantsTurn: true,
  });
}

/** Whether a drain began (or finished) and its turn has not been given back since. */
export function disrupted(o: Pick<Observed, "drainedDigest" | "drainBegunDigest">): boolean {
  return o.drainedDigest !== undefined || o.drainBegunDigest !== undefined;
}

/** Staged for the target: boot files, approval, turn, drain, check, reboot. */
function decideStaged(o: Observed, release: ReleaseRef): Decision {
  if (o.bootFilesDue) {
    // Part of staging: a release the ESP cannot take fails here, with the node still serving.
    const action: Action = { kind: "install-boot-files", slot: o.other.slot, release };
    return d("Downloading", "Downloading", action, "staged; installing its kernel and initrd");
  }
  const hold = armHold(o.noVerdict, release);
  if (hold !== undefined) {
    // No verdict on the release (never failedReleases): the machine, not the release, needs a
    // person. Give the turn back first, then wait for liken.sh/retry or a new target.
    if (disrupted(o)) {
      return giveBack(o, "TrialNotArmed", "Failed", hold);
    }
    return d("TrialNotArmed", "Failed", WAIT, hold);
  }
  if (o.policy === "Manual" && !approves(o.approval, release)) {
    const why = `waiting for liken approve-reboot of ${release.version}`;
    return d("AwaitingApproval", "RebootPending", WAIT, why);
  }
  if (!o.turn) {
    if (disrupted(o)) {
      // The turn was taken back (or lost) after the drain began, perhaps before the status
      // that announced it landed (seed 71742). The machine is down whatever its record says:
      // it stays Updating until its node is back, then uncordons, and only then says it did
      // not keep the turn (status.turnTakenBack), which is when the operator stops counting it.
      const why = "the turn is no longer held but a drain began for it; giving it back";
      return giveBack(o, "AwaitingTurn", "UpdatePending", why);
    }
    return d(
      "AwaitingTurn",
      "UpdatePending",
      { kind: "request-turn", release },
      "asked for a turn",
      {
        wantsTurn: true,
      },
    );
  }
  const held = { wantsTurn: true };
  if (o.drainedDigest !== release.digest) {
    return d("Draining", "Updating", { kind: "drain", release }, "turn granted", {
      ...held,
      stage: "Draining",
    });
  }
  return d(
    "CheckingSlot",
    "Updating",
    { kind: "check-and-reboot", slot: o.other.slot, release },
    "drained",
    { ...held, stage: "CheckingSlot" },
  );
}

/** Running a different release than the target: get the target into the other slot. */
function decideTowards(o: Observed, target: ReleaseRef, t: Timeouts): Decision {
  if (o.failedDigests.includes(target.digest)) {
    const why = `${target.version} failed here before; not retried`;
    // Back from a fallback or a skipped trial: give the turn back and uncordon first.
    if (disrupted(o)) {
      return giveBack(o, "Failed", "Failed", why);
    }
    return d("Failed", "Failed", WAIT, why);
  }
  // Withdraw first, synced: a reboot after this point boots neither release.
  if (o.download !== undefined && !sameRelease(o.download, target)) {
    const action: Action = { kind: "cancel-download", failed: false };
    return d("Withdrawing", "Downloading", action, "target changed");
  }
  const other = o.other;
  if (
    (other.state === "staged" || other.state === "writing") &&
    !sameRelease(other.release, target)
  ) {
    if (disrupted(o)) {
      const reason = "target changed while holding a turn";
      return giveBack(o, "Withdrawing", "Downloading", reason);
    }
    return d(
      "Withdrawing",
      "Downloading",
      { kind: "withdraw", slot: other.slot },
      "target changed",
    );
  }
  if (other.state === "staged") return decideStaged(o, target);
  if (disrupted(o)) {
    // Back from a trial without a verdict (give-up.ts): give this turn back and uncordon; the
    // next try asks for a turn of its own and drains again.
    const reason = "back from a trial without a verdict; giving the turn back before trying again";
    return giveBack(o, "Downloading", "Downloading", reason);
  }
  if (o.download !== undefined) {
    if (timedOut("Downloading", o.downloadIdleSince, o.now, t)) {
      const why = `no progress for ${t.downloadMs} ms`;
      return d("Downloading", "Downloading", { kind: "cancel-download", failed: true }, why);
    }
    return d("Downloading", "Downloading", WAIT, "downloading");
  }
  if (o.downloadFailedAt !== undefined && o.now - o.downloadFailedAt < t.downloadRetryMs) {
    return d("Downloading", "Downloading", WAIT, "download failed; retrying later");
  }
  const action: Action = { kind: "download", slot: other.slot, release: target };
  return d("Downloading", "Downloading", action, `downloading ${target.version}`);
}

/**
 * Whether the running release is the target's version. A version names one build: the API
 * refuses a change of a catalog entry's digest, but an entry removed in one edit and added
 * back with another digest in the next gets past it. A machine that runs that version must not
 * stage the other build: cluster-operator counts it as on the target (status.version) and
 * would never grant the turn it asks for, while the Cluster reads Ready
 * (docs/adr/catalog-digest-immutable.md).
 */
export function runsTargetVersion(running: ReleaseRef | undefined, target: ReleaseRef): boolean {
  return running !== undefined && running.version === target.version;
}

/** Why a machine on the target's version is idle; names a digest that differs from the catalog's. */
export function runsTargetWhy(running: ReleaseRef | undefined, target: ReleaseRef): string {
  if (running === undefined || sameRelease(running, target)) return "runs the target";
  return (
    `runs ${target.version} as built with digest ${running.digest}; the catalog now names ` +
    `${target.digest} for that version, which is not rolled out: publish a rebuild under a new ` +
    `version and point spec.version at it`
  );
}

/**
 * The trial armed in an earlier boot that this boot did not start: the machine rebooted, and
 * the bootloader booted the old slot with the boot-once entry still armed (GRUB: next_entry set,
 * liken_trial empty; systemd-boot: LoaderEntryOneShot still set) or consumed without starting
 * the trial (no counted try). A restart of the agent within the arming boot is not that: the
 * reboot is still due. A trial the bootloader started shows as on-trial or trial-failed.
 * A verdict only for a trial the bootloader was shown to hold: read back armed before the
 * reboot (`shown`), or still armed now; else it is trialNotArmed().
 */
export function trialNotTaken(o: Pick<Observed, "boot" | "bootId" | "armedTrial">): Slot | null {
  const slot = bootNotStarting(o);
  if (slot === null) return null;
  return o.armedTrial?.shown === true || o.boot.kind === "armed" ? slot : null;
}

/**
 * As trialNotTaken, but the bootloader was never shown to hold the trial (only the intent was
 * recorded: a power cut or a failed arm before the read-back) and shows nothing armed now: the
 * old default booted because nothing was armed. A failure to look, not a verdict (arming.ts).
 */
export function trialNotArmed(o: Pick<Observed, "boot" | "bootId" | "armedTrial">): Slot | null {
  const slot = bootNotStarting(o);
  if (slot === null) return null;
  return o.armedTrial?.shown === true || o.boot.kind === "armed" ? null : slot;
}

/** The slot of a trial recorded in an earlier boot that this boot did not start, or null. */
function bootNotStarting(o: Pick<Observed, "boot" | "bootId" | "armedTrial">): Slot | null {
  const t = o.armedTrial;
  if (t === undefined || t.bootId === undefined || t.bootId === o.bootId) return null;
  if (o.boot.kind !== "armed" && o.boot.kind !== "steady") return null;
  return o.boot.slot === t.slot && o.boot.kind === "steady" ? null : t.slot;
}

/** The bootloader did not take the trial: purely local, never armed or rebooted again for it. */
function decideNotTaken(o: Observed, slot: Slot): Decision {
  const why = `the bootloader did not take the trial of slot ${slot}`;
  const action: Action = { kind: "not-taken-report", slot };
  // A turn still held (drained for it) is kept until this boot rejoins (giveBack).
  if (disrupted(o)) return rejoining(why, action);
  return d("TrialNotTaken", "Failed", action, why);
}

/**
 * The trial fell back: purely local (bootloader + memory), reported to the API when it is
 * reachable. The turn it drained for is kept until this boot rejoins (giveBack), so the report
 * must not read as over (step Failed) to the operator meanwhile.
 */
function decideFellBack(o: Observed, slot: Slot): Decision {
  const action: Action = { kind: "fall-back-report", slot };
  if (disrupted(o)) return rejoining("trial fell back", action);
  return d("FallingBack", "Failed", action, "trial fell back");
}

export function decide(o: Observed, t: Timeouts = DEFAULT_TIMEOUTS): Decision {
  const boot = o.boot;
  const notTaken = trialNotTaken(o);
  if (notTaken !== null) return decideNotTaken(o, notTaken);
  const notArmed = trialNotArmed(o);
  if (notArmed !== null) {
    // The turn is still held: count the attempt, disarm what half an arm left, arm again.
    const why =
      `the trial of slot ${notArmed} was never shown armed before the reboot ` +
      "(a power cut or a failed arm): no verdict on the release";
    const action: Action = { kind: "not-armed-report", slot: notArmed };
    return d("TrialNotArmed", "Updating", action, why, { wantsTurn: true });
  }
  switch (boot.kind) {
    case "on-trial":
      return decideOnTrial(o, boot.slot, t);
    case "trial-failed":
      return decideFellBack(o, boot.slot);
    case "armed":
      return decideArmed(o, boot.slot);
    case "steady":
    case "off-default":
      break;
    default: {
      const never: never = boot;
      throw new Error(`unknown boot verdict ${JSON.stringify(never)}`);
    }
  }
  if (!o.apiReachable) {
    return d("Disconnected", "Ready", WAIT, "API server not reachable; serving on", {
      wantsTurn: false,
    });
  }
  const target = o.target;
  if (target === undefined || runsTargetVersion(o.running.release, target)) {
    const idle = target === undefined ? "no target" : runsTargetWhy(o.running.release, target);
    if (o.download !== undefined) {
      return d("Idle", "Ready", { kind: "cancel-download", failed: false }, idle);
    }
    if (disrupted(o)) {
      const reason = "runs the target";
      return giveBack(o, "Idle", "Ready", reason);
    }
    return d("Idle", "Ready", WAIT, idle);
  }
  return decideTowards(o, target, t);
}

/**
 * The status written right before a reboot that check-and-reboot decided (armed, or without the
 * trial after a mismatch): the watcher sees why the machine went down while the turn is held.
 */
export function rebootingDecision(reason: string): Decision {
  return d("Rebooting", "Updating", { kind: "reboot", reason }, reason, {
    stage: "Rebooting",
    wantsTurn: true,
  });
}

/** What reading the staged slot back found (slots/check.ts), or why it could not look. */
export type SlotCheck =
  | { kind: "matched" }
  | { kind: "mismatch"; problems: readonly string[] }
  /** The look failed (EIO, the slot not staged, the deadline): says nothing of the bytes. */
  | { kind: "unread"; code: string | undefined; message: string };

/** The turn record, read again right before draining and right before arming. */
export type TurnLook =
  | { kind: "held" }
  | { kind: "gone" }
  | { kind: "unread"; code: string | undefined; message: string };

export type DrainVerdict =
  /** The turn is held: cordon and drain. */
  | { kind: "drain" }
  /** Not held (taken back, reason Overtaken), or unread: no drain; the next look decides. */
  | { kind: "stand-down"; why: string };

/**
 * Right before the drain, on the turn read again fresh: the look that chose the drain may be
 * older than the operator taking the turn back (it does so only while the machine has not
 * started: docs/operator.md, "Overtaken"). A drain without a turn would take a machine down
 * that no budget counts; an unread turn is no licence either.
 */
export function beforeDrain(turn: TurnLook, stopping: boolean): DrainVerdict {
  if (stopping) return { kind: "stand-down", why: "the agent is stopping" };
  switch (turn.kind) {
    case "held":
      return { kind: "drain" };
    case "gone":
      return { kind: "stand-down", why: "the turn is no longer recorded (taken back): no drain" };
    case "unread":
      return {
        kind: "stand-down",
        why: `cannot read the turn again (${turn.code ?? "no code"}): ${turn.message}; no drain until it reads`,
      };
    default: {
      const never: never = turn;
      throw new Error(`unknown turn look ${JSON.stringify(never)}`);
    }
  }
}

export type CheckVerdict =
  /** The slot matched and the turn is held: record the trial, arm it, reboot. */
  | { kind: "arm"; why: string }
  /** The slot does not match: remember the release as failed, reboot without the trial. */
  | { kind: "skip-trial"; why: string }
  /** Could not look (slot or turn): change nothing; the next tick decides again. */
  | { kind: "retry"; code: string | undefined; why: string }
  /** Stopping, or the turn is no longer recorded: no reboot. */
  | { kind: "stand-down"; why: string };

/**
 * The check-and-reboot decision, after the slot was read back and the turn read again. Only a
 * real mismatch is remembered as a failed release: an I/O error or a timeout is not a verdict
 * on the release, and remembering it would skip a good release's trial for good.
 */
export function afterSlotCheck(
  check: SlotCheck,
  turn: TurnLook,
  stopping: boolean,
  slot: Slot,
  release: ReleaseRef,
): CheckVerdict {
  if (stopping) return { kind: "stand-down", why: "the agent is stopping" };
  if (turn.kind === "unread") {
    return { kind: "retry", code: turn.code, why: `cannot read the turn: ${turn.message}` };
  }
  if (turn.kind === "gone") {
    return { kind: "stand-down", why: "the turn is no longer recorded" };
  }
  switch (check.kind) {
    case "matched":
      return { kind: "arm", why: `trial of ${release.version} in slot ${slot}` };
    case "mismatch": {
      const why =
        `slot ${slot} does not match the staged release ${release.version}: ` +
        check.problems.join("; ");
      return { kind: "skip-trial", why };
    }
    case "unread":
      return {
        kind: "retry",
        code: check.code,
        why: `cannot read slot ${slot} back: ${check.message}`,
      };
    default: {
      const never: never = check;
      throw new Error(`unknown slot check ${JSON.stringify(never)}`);
    }
  }
}
