// Which release is known good, and where a revert of a release goes: the newest proven
// release neither recalled nor revoked (status.lastKnownGood, then status.priorKnownGood).
import { sameRelease, type Cluster, type KnownGood, type ReleaseRef } from "../../api/index.js";
import { type TargetView } from "../../release-decision/view.js";
import { rfc3339 } from "../../api/time.js";
import { withdrawnWhy } from "../../release-decision/decide.js";
import { releaseInputOf } from "../../release-decision/input.js";
import { type RevertInput, type RevertOutcome } from "./input.js";

// ---------------------------------------------------------------------------------------
// Known good.

/**
 * The target is known good once every machine runs it and is Ready (none Lost), no turn is
 * held (so every soak is over) and the brake does not hold. The release it replaces as
 * lastKnownGood becomes priorKnownGood, unless it was revoked since.
 */
export function knownGoodOf(
  i: RevertInput,
  view: TargetView,
): Pick<RevertOutcome, "lastKnownGood" | "priorKnownGood"> {
  const s = i.cluster.status ?? {};
  const kept = { lastKnownGood: s.lastKnownGood, priorKnownGood: s.priorKnownGood };
  if (view.kind !== "spec" && view.kind !== "revert") return kept;
  const t = view.target;
  if (sameRelease(s.lastKnownGood, t) || !settledOn(i, t)) return kept;
  const usable = (k: KnownGood | undefined): KnownGood | undefined =>
    k !== undefined && !sameRelease(k, t) && !isRevoked(i.cluster, k) ? k : undefined;
  const prior = usable(s.lastKnownGood) ?? usable(s.priorKnownGood);
  return {
    lastKnownGood: { version: t.version, digest: t.digest, since: rfc3339(i.now) },
    priorKnownGood: prior,
  };
}

export function settledOn(i: RevertInput, t: ReleaseRef): boolean {
  if (i.machines.length === 0 || i.turns.length > 0 || i.brakeHeld) return false;
  return i.machines.every((m) => {
    const s = m.status ?? {};
    const digestOk = s.digest === undefined || s.digest === t.digest;
    return (
      s.version === t.version && digestOk && s.step === "Ready" && !i.lost.has(m.metadata.name)
    );
  });
}

export function isRevoked(c: Cluster, r: ReleaseRef): boolean {
  return (c.status?.revokedReleases ?? []).some((x) => sameRelease(x, r));
}

/**
 * Where a revert of `from` goes: the newest proven release (status.lastKnownGood, then
 * status.priorKnownGood) that is not `from`, and that the channel did not recall nor the
 * Cluster revoke (the release decision's rule: no turn for either, a revert's included).
 */
export function revertTargetOf(c: Cluster, from: ReleaseRef): KnownGood | undefined {
  const s = c.status ?? {};
  const input = releaseInputOf(c);
  for (const k of [s.lastKnownGood, s.priorKnownGood]) {
    if (k !== undefined && !sameRelease(k, from) && withdrawnWhy(input, k) === undefined) return k;
  }
  return undefined;
}

/** The proven releases a revert of `from` cannot go to, and why (for NoKnownGood's message). */
export function withdrawnProven(c: Cluster, from: ReleaseRef): string {
  const s = c.status ?? {};
  const input = releaseInputOf(c);
  const why = [s.lastKnownGood, s.priorKnownGood]
    .filter((k): k is KnownGood => k !== undefined && !sameRelease(k, from))
    .map((k) => withdrawnWhy(input, k))
    .filter((w): w is string => w !== undefined);
  return why.length === 0 ? "" : ` (${why.join("; ")})`;
}
