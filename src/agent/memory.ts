// What the agent must remember across its own restarts and reboots, in stateDir/agent.json
// (written atomically and synced, like the slot markers). Everything else is read fresh from
// the slots, the bootloader and the API each time.
//
// Every change is a pure transition below (old memory in, new memory out, never edited in
// place), and MemoryKeeper.update is the one place that writes the file.
import { readFile } from "node:fs/promises";
import path from "node:path";
import type {
  DrainTimedOut,
  FailedRelease,
  ReleaseRef,
  SlotName,
  TrialRecord,
} from "../api/types.js";
import { FAILED_RELEASES_MAX_ITEMS } from "../api/types.js";
import { MACHINE_STATUS_BOUNDS, maxLengthOf, truncate } from "../api/bounds.js";
import { writeFileAtomic } from "../slots/atomic.js";
import { TRIAL_NOT_ARMED } from "./arming.js";
import type { GiveUpReason } from "./give-up.js";
import { withSeen } from "./rejoin.js";

export interface Memory {
  /** Releases not to try again (failed trial or slot check), newest last. */
  failed: FailedRelease[];
  /** The drain finished for this digest in the turn held now (cleared when given back). */
  drainedDigest?: string;
  /**
   * A drain began for this digest (written before the cordon) and its turn was not given back
   * since: what a machine must own up to when its turn is taken back (steps.ts disrupted).
   */
  drainBegunDigest?: string;
  /** The trial armed last: which release, in which slot. */
  trial?: ArmedTrial;
  /** When this trial boot was first seen (ms since boot, clock.ts), for the prove timeout. */
  trialSeenAt?: number;
  /** The last trial's outcome, reported in status.lastTrial until the next one. */
  lastTrial?: TrialRecord;
  /** The last `liken.sh/retry` annotation value acted on. */
  retryHandled?: string;
  /** The turn last given back on a drain timeout (onDrainTimeout Skip), reported in status. */
  drainTimedOut?: DrainTimedOut;
  /**
   * The staged release whose boot files (systemd-boot: kernel and initrd on the ESP) were
   * installed for its slot when it was staged: no turn is asked for before they are.
   */
  bootFiles?: { slot: SlotName; digest: string };
  /**
   * The last trial that ended without a verdict on its release (a failure to look, such as a
   * trial the machine could not show it armed): counted, reported, never remembered as failed.
   */
  noVerdict?: NoVerdict;
}

/**
 * A trial of a release that ended without a verdict: the release is not failed for it, and the
 * agent tries again a bounded number of times (arming.ts).
 */
export interface NoVerdict extends ReleaseRef {
  slot: SlotName;
  /** CamelCase, e.g. TrialNotArmed (docs/agent.md, "Trials without a verdict"). */
  reason: string;
  /** How many attempts in a row ended this way for this digest and reason. */
  attempts: number;
  at: string;
  message: string;
}

export interface ArmedTrial extends ReleaseRef {
  slot: SlotName;
  armedAt: string;
  /** The boot it was armed in (boot_id): a later boot that did not start it, did not take it. */
  bootId?: string;
  /**
   * When the bootloader read back armed for this trial. Absent: only the intent was recorded
   * (the arm failed or was cut short), and a later boot that did not start the trial is no
   * verdict on the release (steps.ts trialNotArmed).
   */
  shownAt?: string;
  /** Which attempt at arming this release this is (1, 2, ...; bounded by arming.ts). */
  attempt?: number;
  /**
   * The agent is withdrawing the trial from the bootloader (disarming()): a later boot that
   * finds nothing armed is then no verdict, and not an arming attempt either.
   */
  withdrawing?: true;
  /** Why the agent gave the trial boot up (prove timeout), said again after the fallback. */
  gaveUp?: string;
  /** The reason the report after the fallback gives, when not TrialFellBack (give-up.ts). */
  gaveUpReason?: GiveUpReason;
  /** The Node's bootIDs the trial boot read (rejoin.ts), to name them when it gives up. */
  nodeBootIds?: string[];
}

export const EMPTY_MEMORY: Memory = { failed: [] };

export class MemoryFile {
  readonly file: string;

  constructor(stateDir: string) {
    this.file = path.join(stateDir, "agent.json");
  }

  async load(): Promise<Memory> {
    try {
      const m = JSON.parse(await readFile(this.file, "utf8")) as Memory;
      return { ...m, failed: Array.isArray(m.failed) ? m.failed : [] };
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === "ENOENT") return { failed: [] };
      // A torn file cannot happen (atomic rename); a corrupt one must not make the agent
      // forget a failed release silently: refuse to start and say where.
      throw e;
    }
  }

  async save(m: Memory): Promise<void> {
    await writeFileAtomic(this.file, `${JSON.stringify(m, null, 1)}\n`);
  }
}

/** The memory in use, and the one place that writes it: a transition, then a synced save. */
export class MemoryKeeper {
  private mem: Memory = EMPTY_MEMORY;

  constructor(private readonly file: MemoryFile) {}

  get now(): Memory {
    return this.mem;
  }

  async load(): Promise<void> {
    this.mem = await this.file.load();
  }

  /** Applies `transition`; writes the file only when something changed. */
  async update(transition: (m: Memory) => Memory): Promise<void> {
    const next = transition(this.mem);
    if (JSON.stringify(next) === JSON.stringify(this.mem)) return;
    await this.file.save(next);
    this.mem = next;
  }
}

/** Adds a failed release (once per digest), keeping the newest FAILED_RELEASES_MAX_ITEMS. */
export function rememberFailed(list: FailedRelease[], f: FailedRelease): FailedRelease[] {
  const rest = list.filter((x) => x.digest !== f.digest);
  return [...rest, f].slice(-FAILED_RELEASES_MAX_ITEMS);
}

/** Memory without the given keys (a copy; the old object is left as it was). */
export function without(m: Memory, ...keys: (keyof Memory)[]): Memory {
  const copy = { ...m };
  for (const k of keys) delete copy[k];
  return copy;
}

// ------------------------------------------------------------------ transitions

/** A new `liken.sh/retry` value: forget the failed releases, once per value. */
export function retried(m: Memory, value: string | undefined): Memory {
  if (value === undefined || value === m.retryHandled) return m;
  return { ...without(m, "noVerdict"), failed: [], retryHandled: value };
}

/** This boot is the trial: note when it was first seen, once (restarts keep the first time). */
export function trialSeen(m: Memory, at: number): Memory {
  return m.trialSeenAt === undefined ? { ...m, trialSeenAt: at } : m;
}

/** A drain for `digest` is about to begin (before the cordon). */
export function drainBegun(m: Memory, digest: string): Memory {
  return { ...m, drainBegunDigest: digest };
}

/** A drain stopped and undid liken's cordon itself (the target changed): nothing is begun. */
export function drainUndone(m: Memory): Memory {
  return without(m, "drainBegunDigest");
}

/** The drain of this turn finished for `digest`. */
export function drained(m: Memory, digest: string): Memory {
  return { ...m, drainedDigest: digest };
}

/** The turn was given back (uncordoned): the next turn drains again. */
export function turnGivenBack(m: Memory): Memory {
  return without(m, "drainedDigest", "drainBegunDigest");
}

/** The drain of this turn timed out and the turn was given back (drain-timeout.ts). */
export function drainSkipped(m: Memory, record: DrainTimedOut): Memory {
  return { ...without(m, "drainedDigest", "drainBegunDigest"), drainTimedOut: record };
}

/** The boot files of the staged slot are about to be replaced: no longer those of any release. */
export function bootFilesStarted(m: Memory): Memory {
  return without(m, "bootFiles");
}

/** The staged `release`'s boot files are installed for `slot`. */
export function bootFilesInstalled(m: Memory, slot: SlotName, release: ReleaseRef): Memory {
  return { ...m, bootFiles: { slot, digest: release.digest } };
}

/**
 * The bootloader refused the staged release's boot files (the ESP too small, the copy not
 * matching the release): remembered as failed, so the machine neither asks for a turn nor tries
 * again at every look, and reported as a skipped trial with the code and what to do.
 */
export function bootFilesRefused(
  m: Memory,
  release: ReleaseRef,
  slot: SlotName,
  at: string,
  why: string,
): Memory {
  const message =
    `the kernel and initrd of ${release.version} were not installed for slot ${slot}: ${why}; ` +
    "no turn was asked for, and the release is not tried again on this machine until " +
    "liken.sh/retry";
  return failedSkipped(without(m, "bootFiles"), release, slot, at, "BootFilesRefused", message);
}

/**
 * A trial's message as status.lastTrial holds it (the CRD's maxLength). It is made from what
 * went wrong (every mismatched artifact, a health check's output) and persisted: one character
 * too many would have the API server refuse every later status write of this machine.
 */
export function trialMessage(message: string): string {
  return truncate(message, maxLengthOf(MACHINE_STATUS_BOUNDS, "lastTrial.message"));
}

/** `release` failed here without a trial: remembered as failed and reported as skipped. */
function failedSkipped(
  m: Memory,
  release: ReleaseRef,
  slot: SlotName,
  at: string,
  reason: "BootFilesRefused" | "SlotCheckMismatch",
  message: string,
): Memory {
  const ref = { version: release.version, digest: release.digest };
  return {
    ...m,
    failed: rememberFailed(m.failed, { ...ref, at, reason }),
    lastTrial: { ...ref, slot, result: "Skipped", at, reason, message: trialMessage(message) },
  };
}

/**
 * The slot matched: the intent to arm the trial of `release` in `slot`, written before the
 * bootloader is touched, so that after a crash or a power cut the agent still knows which
 * release it meant to try. Not yet a trial the bootloader was shown to hold: armShown() says so.
 */
export function armed(
  m: Memory,
  release: ReleaseRef,
  slot: SlotName,
  at: string,
  bootId?: string,
): Memory {
  const trial: ArmedTrial = {
    version: release.version,
    digest: release.digest,
    slot,
    armedAt: at,
    ...(bootId === undefined ? {} : { bootId }),
    attempt: notArmedAttempts(m, release) + 1,
  };
  return { ...without(m, "trialSeenAt"), trial };
}

/** The bootloader read back armed for the recorded trial: from now on its outcome is a verdict. */
export function armShown(m: Memory, at: string): Memory {
  const t = m.trial;
  if (t === undefined || t.shownAt !== undefined) return m;
  const rest = m.noVerdict?.digest === t.digest ? without(m, "noVerdict") : m;
  return { ...rest, trial: { ...t, shownAt: at } };
}

/** How many attempts at arming `release` ended without the bootloader shown armed. */
export function notArmedAttempts(m: Memory, release: ReleaseRef): number {
  const n = m.noVerdict;
  return n !== undefined && n.reason === TRIAL_NOT_ARMED && n.digest === release.digest
    ? n.attempts
    : 0;
}

/**
 * The recorded trial could not be shown armed (the arm failed, or a later boot found nothing
 * armed and the trial not started): counted as attempt `trial.attempt` for its release, which
 * is NOT remembered as failed and whose lastTrial is left as it was (the failure brake counts
 * neither). Idempotent: a crash before the disarm repeats the step without counting it twice.
 * The trial itself stays until the bootloader is disarmed (disarmed()).
 */
export function notArmed(m: Memory, why: string, at: string): Memory {
  const t = m.trial;
  if (t === undefined || t.withdrawing) return m;
  const attempts = Math.max(t.attempt ?? 1, notArmedAttempts(m, t));
  const ref = { version: t.version, digest: t.digest };
  if (notArmedAttempts(m, t) === attempts) return m;
  const message =
    `the trial of ${ref.version} in slot ${t.slot} could not be shown armed ` +
    `(attempt ${attempts}): ${why}`;
  const noVerdict: NoVerdict = {
    ...ref,
    slot: t.slot,
    reason: TRIAL_NOT_ARMED,
    attempts,
    at,
    message,
  };
  return { ...m, noVerdict };
}

/**
 * About to withdraw the trial from the bootloader (written before it is touched): no longer a
 * trial the bootloader is shown to hold, so a power cut after the bootloader's disarm and before
 * disarmed() is not read as a trial the bootloader did not take.
 */
export function disarming(m: Memory): Memory {
  const t = m.trial;
  if (t === undefined || t.withdrawing) return m;
  const { shownAt: _shown, ...rest } = t;
  return { ...m, trial: { ...rest, withdrawing: true } };
}

/** The armed trial was withdrawn from the bootloader: nothing is armed any more. */
export function disarmed(m: Memory): Memory {
  return without(m, "trial", "trialSeenAt");
}

/** The trial boot read its Node showing `bootId` (kept once each, bounded: rejoin.ts). */
export function nodeBootSeen(m: Memory, bootId: string): Memory {
  if (m.trial === undefined) return m;
  return { ...m, trial: { ...m.trial, nodeBootIds: withSeen(m.trial.nodeBootIds, bootId) } };
}

/** The trial boot did not prove itself: say why, for the report after the fallback. */
export function gaveUp(m: Memory, why: string, reason?: GiveUpReason): Memory {
  if (m.trial === undefined) return m;
  return { ...m, trial: { ...m.trial, gaveUp: why, ...(reason ? { gaveUpReason: reason } : {}) } };
}

/**
 * The slot read back did not match the staged release: remembered as failed (so the machine
 * does not download and fail the same bytes in a loop) and reported as a skipped trial.
 */
export function skipped(
  m: Memory,
  release: ReleaseRef,
  slot: SlotName,
  at: string,
  why: string,
): Memory {
  return failedSkipped(
    m,
    release,
    slot,
    at,
    "SlotCheckMismatch",
    `${why}; rebooted without the trial`,
  );
}

/** The trial boot rejoined and `slot` is the default now. */
export function promoted(
  m: Memory,
  release: ReleaseRef | undefined,
  slot: SlotName,
  at: string,
): Memory {
  return {
    ...without(m, "trial", "trialSeenAt"),
    lastTrial: {
      version: release?.version ?? "unknown",
      digest: release?.digest ?? "",
      slot,
      result: "Succeeded",
      at,
      reason: "Promoted",
      message: `booted slot ${slot} once, rejoined the cluster; it is the default now`,
    },
  };
}
