// Whether the operator's clock can judge the channel's expiry, pure: the trust's freshness half
// of the release decision. Two clocks are compared with this copy's: the time of the last
// verification (status.trust.verifiedAt, on whatever clock made it) and the API server's own
// stamps on the Cluster (metadata.creationTimestamp and managedFields[].time: its clock, which
// every status write refreshes). A clock behind the API server's stamps went back (a dead RTC
// battery, a bad NTP answer), and an expired channel would look fresh on it: refused
// (ClockBehind). A clock behind the last verification but not behind the API server means that
// verification ran on a clock that was ahead, since fixed: the channel is verified on the clock
// as it reads now, and nobody is told to fix a clock that is right
// (docs/adr/one-release-decision.md).
import type { Cluster } from "../api/types.js";

/**
 * How far this copy's clock may read behind another before it counts as behind: 5 minutes
 * covers NTP steps, two copies' skew, and the API server's stamp being a poll old.
 */
export const CLOCK_BEHIND_TOLERANCE_MS = 5 * 60_000;

export type ClockVerdict =
  | { kind: "ok" }
  /** This clock reads before a time already seen: it cannot judge expiry. */
  | { kind: "behind"; message: string }
  /** The last verification ran on a clock that was ahead; this one agrees with the API server. */
  | { kind: "ran-ahead"; message: string };

/** The latest time the API server stamped on the Cluster: a lower bound of the real time. */
export function apiTimeOf(c: Cluster): Date | undefined {
  const meta = c.metadata as Cluster["metadata"] & { managedFields?: { time?: string }[] };
  const stamps = [meta.creationTimestamp, ...(meta.managedFields ?? []).map((f) => f.time)]
    .map((t) => (t === undefined ? NaN : Date.parse(t)))
    .filter((t) => Number.isFinite(t));
  return stamps.length === 0 ? undefined : new Date(Math.max(...stamps));
}

const iso = (d: Date): string => d.toISOString().replace(/\.\d{3}Z$/, "Z");

export function clockVerdict(
  now: Date,
  verifiedAt: Date | undefined,
  apiTime: Date | undefined,
): ClockVerdict {
  const t = now.getTime();
  if (apiTime !== undefined && t < apiTime.getTime() - CLOCK_BEHIND_TOLERANCE_MS) {
    return {
      kind: "behind",
      message: `this operator's clock reads ${iso(now)}, before ${iso(apiTime)} that the API server stamped on this Cluster`,
    };
  }
  if (verifiedAt === undefined || t >= verifiedAt.getTime() - CLOCK_BEHIND_TOLERANCE_MS) {
    return { kind: "ok" };
  }
  if (apiTime === undefined) {
    return {
      kind: "behind",
      message: `this operator's clock reads ${iso(now)}, before ${iso(verifiedAt)} when it last verified the channel`,
    };
  }
  return {
    kind: "ran-ahead",
    message: `the last verification (${iso(verifiedAt)}) ran on a clock that was ahead: this operator's clock reads ${iso(now)} and agrees with the API server (${iso(apiTime)}), so the channel is judged on it`,
  };
}
