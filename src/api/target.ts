// The fleet's target, pure, shared by cluster-operator and the agent so both read it alike:
// spec.version's catalog entry, unless a revert is in force for it (status.revert: the fleet
// goes to the revert's `to`) or the Cluster revoked it (status.revokedReleases: nothing
// moves). docs/revert.md states the rules; test/unit/operator-revert.test.ts has the table.
import { sameRelease, type Cluster, type ReleaseRef, type RevertRecord } from "./types.js";
import type { RevokedRelease } from "./types.js";

export type TargetView =
  /** spec.version unset, or naming no catalog entry. */
  | { kind: "none" }
  /** spec.version's release. */
  | { kind: "spec"; target: ReleaseRef }
  /** A revert is in force for spec.version's release: the fleet goes to `target`. */
  | { kind: "revert"; target: ReleaseRef; from: ReleaseRef; revert: RevertRecord }
  /** spec.version names a revoked release and no revert is in force for it: no target. */
  | { kind: "revoked"; from: ReleaseRef; revoked: RevokedRelease };

/** spec.version with its catalog digest, when both exist. */
export function specTarget(cluster: Cluster | undefined): ReleaseRef | undefined {
  const spec = cluster?.spec;
  if (spec?.version === undefined) return undefined;
  const entry = spec.releases.catalog?.find((c) => c.version === spec.version);
  return entry === undefined ? undefined : { version: entry.version, digest: entry.digest };
}

export function revokedOf(
  cluster: Cluster | undefined,
  r: ReleaseRef | undefined,
): RevokedRelease | undefined {
  if (r === undefined) return undefined;
  return cluster?.status?.revokedReleases?.find((x) => sameRelease(x, r));
}

export function targetView(cluster: Cluster | undefined): TargetView {
  const spec = specTarget(cluster);
  if (spec === undefined) return { kind: "none" };
  const revert = cluster?.status?.revert;
  // A revert holds only while spec.version still names the release it left: a person (or
  // GitOps) that moves spec.version on ends it, and their choice is the target.
  if (revert !== undefined && sameRelease(revert.from, spec)) {
    return { kind: "revert", target: revert.to, from: spec, revert };
  }
  const revoked = revokedOf(cluster, spec);
  if (revoked !== undefined) return { kind: "revoked", from: spec, revoked };
  return { kind: "spec", target: spec };
}

/** The release every machine moves to now; undefined: none (unset, or revoked). */
export function effectiveTarget(cluster: Cluster | undefined): ReleaseRef | undefined {
  const v = targetView(cluster);
  switch (v.kind) {
    case "none":
    case "revoked":
      return undefined;
    case "spec":
    case "revert":
      return v.target;
    default: {
      const never: never = v;
      throw new Error(`unknown target view ${JSON.stringify(never)}`);
    }
  }
}
