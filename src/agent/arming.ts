// A trial the machine could not show it armed: a failure to look, not a verdict on the release.
//
// The agent records its intent to arm a trial (memory.ts armed()) before it touches the
// bootloader, and that the trial is armed (armShown()) only once the bootloader reads back armed.
// Between the two, a power cut, or an arm that fails (EIO, a read-only or full ESP), leaves a
// machine that boots its old default: the bootloader was never shown to hold the trial, so that
// boot says nothing about the release. Such an attempt is counted (memory's noVerdict, reason
// TrialNotArmed), reported on the Machine, and tried again within the same turn, at most
// MAX_ARM_ATTEMPTS times; then the machine gives the turn back and holds, the release never
// remembered as failed, so the operator's failure brake (ReleaseFailed) is not tripped by it.
// TrialNotTaken stays the verdict for a trial the bootloader WAS shown to hold and did not start.
import type { ReleaseRef } from "../api/types.js";

/** The reason, in memory's noVerdict and on the Machine (docs/agent.md). */
export const TRIAL_NOT_ARMED = "TrialNotArmed";

/**
 * Attempts at arming one release before the machine holds. One arm is a few synced writes of the
 * bootloader's state: a single power cut or a passing EIO is over by the second attempt, and a
 * third covers a cut during that retry; an ESP that failed three times in a row (read-only,
 * full, dying) needs a person, and every attempt costs the fleet a turn held and a drained node.
 */
export const MAX_ARM_ATTEMPTS = 3;

/** The arming attempts of the last trial without a verdict, as decide() sees them (memory). */
export interface NoVerdictSeen extends ReleaseRef {
  reason: string;
  attempts: number;
  message: string;
}

/**
 * Why the machine must not arm `release` again (the attempts are used up), or undefined.
 * A new `liken.sh/retry` value forgets the count (memory.ts retried()).
 */
export function armHold(seen: NoVerdictSeen | undefined, release: ReleaseRef): string | undefined {
  if (seen === undefined || seen.reason !== TRIAL_NOT_ARMED) return undefined;
  if (seen.digest !== release.digest || seen.attempts < MAX_ARM_ATTEMPTS) return undefined;
  return (
    `${seen.message}; not armed ${seen.attempts} times in a row, so the turn is given back and ` +
    "the release is not tried here again until a person asks (it is not counted as failed). " +
    "Check that the ESP is mounted read-write, has room and reads without I/O errors, then " +
    "set the Machine's liken.sh/retry annotation to a new value to try again"
  );
}

/**
 * The Machine's TrialInconclusive condition for the last trial without a verdict, when it is of
 * the target; undefined otherwise. Says what happened, that the release is not failed, and what
 * comes next: another attempt, or the hold and what to do.
 */
export function inconclusiveMessage(
  seen: NoVerdictSeen | undefined,
  target: ReleaseRef | undefined,
): string | undefined {
  if (seen === undefined || target === undefined || seen.digest !== target.digest) {
    return undefined;
  }
  if (seen.reason !== TRIAL_NOT_ARMED) return seen.message;
  return (
    armHold(seen, target) ??
    `${seen.message}; the release is not counted as failed; armed again within the turn ` +
      `(attempt ${seen.attempts} of ${MAX_ARM_ATTEMPTS})`
  );
}
