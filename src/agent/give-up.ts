// Why the agent gives a trial boot up (reboots it without promoting, so the bootloader boots
// the old default), and whether that reason is a verdict on the release. A verdict is
// remembered as a failed release (not tried again here, counted by the operator's failure
// brake); a failure to LOOK is not: the release is reported as an Inconclusive trial and tried
// again, because an API server that was away for the prove deadline says nothing about it.
export const GIVE_UP_REASONS = [
  /** The Node never showed this boot's bootID with a fresh Ready within the prove deadline. */
  "NodeNotRejoined",
  /** The Node rejoined, but a health gate did not pass within the prove deadline. */
  "HealthCheckFailed",
  /** The API server or the Node could not be read for the whole prove deadline: no verdict. */
  "TrialUnobserved",
  /** The Cluster was retargeted while the machine rebooted: not promoted, no verdict. */
  "TargetChanged",
] as const;
export type GiveUpReason = (typeof GIVE_UP_REASONS)[number];

/** Whether the reason says the release is bad (remember it as failed) or only that no one knows. */
export function isVerdict(r: GiveUpReason): boolean {
  switch (r) {
    case "NodeNotRejoined":
    case "HealthCheckFailed":
      return true;
    case "TrialUnobserved":
    case "TargetChanged":
      return false;
    default: {
      const never: never = r;
      throw new Error(`unknown give-up reason ${String(never)}`);
    }
  }
}

/**
 * Whether the trial of `digest` given up for `reason` (undefined: the bootloader fell back by
 * itself, a panic or a hang) is a verdict on the release, given the machine's previous trial
 * (its lastTrial record). A TrialUnobserved trial is no verdict, unless the previous trial was
 * one of the same release too: the second in a row is. Why a bound at all: a release that
 * breaks the network of its own boot looks, from that boot, exactly like an API server that
 * was away; unbounded, machine after machine would take a turn, drain and reboot for it,
 * again and again. Why the second: the machine's old release read the API server again right
 * after the first fallback (it reported, and asked for a new turn), which rules out a passing
 * outage; a second trial boot that reads nothing for its whole prove deadline points at the
 * release.
 */
export function trialVerdict(
  reason: GiveUpReason | undefined,
  digest: string,
  previous: { digest: string; reason: string; result: string } | undefined,
): boolean {
  if (reason === undefined || isVerdict(reason)) return true;
  return (
    reason === "TrialUnobserved" &&
    previous?.digest === digest &&
    previous.reason === "TrialUnobserved" &&
    previous.result === "Inconclusive"
  );
}
