// The release a Cluster's machines move to, in each trust mode: the one place that reads it,
// for the agent (observe.ts) and the operator (machine-view.ts) alike.
//   pinned          spec.version's catalog entry (the page's flow, unchanged);
//   channel         status.trust.target: the release the signed channel vouches for, written by
//                   cluster-operator after its TUF client verified it (and, with follow, once
//                   the Cluster's wave opened); spec.version, when set, must name it;
//   channel+pinned  both: the channel's target, only when the catalog names the same version
//                   with the same digest (two parties must agree).
// A trust status made from another pinned root than the spec's counts for nothing: a new pin
// starts the trust anew, and until then nothing moves.
//
// Over that choice come the fleet-wide revert and revocation: while a revert is in force for the
// chosen release (status.revert) the fleet goes to the revert's `to`, and a release the Cluster
// revoked (status.revokedReleases) moves nothing. docs/revert.md states the rules;
// test/unit/operator-revert.test.ts has the table.
import {
  sameRelease,
  type Cluster,
  type ReleaseRef,
  type RevertRecord,
  type RevokedRelease,
  type TrustMode,
} from "./types.js";

export function trustModeOf(c: Cluster): TrustMode {
  return c.spec.releases.trust?.mode ?? "pinned";
}

function catalogEntry(c: Cluster, version: string | undefined): ReleaseRef | undefined {
  if (version === undefined) return undefined;
  const e = c.spec.releases.catalog?.find((x) => x.version === version);
  return e === undefined ? undefined : { version: e.version, digest: e.digest };
}

/** What the signed channel vouches for, when the trust status belongs to this spec. */
export function channelTarget(c: Cluster): ReleaseRef | undefined {
  const spec = c.spec.releases.trust;
  const st = c.status?.trust;
  if (spec === undefined || st?.target === undefined) return undefined;
  if (st.rootDigest !== spec.rootDigest) return undefined;
  if (spec.follow === undefined && st.target.version !== c.spec.version) return undefined;
  return { version: st.target.version, digest: st.target.digest };
}

/** The Cluster's target release (version and the digest that starts the chain), if any. */
export function clusterTarget(c: Cluster): ReleaseRef | undefined {
  const mode = trustModeOf(c);
  switch (mode) {
    case "pinned":
      return catalogEntry(c, c.spec.version);
    case "channel":
      return channelTarget(c);
    case "channel+pinned": {
      const t = channelTarget(c);
      const pinned = catalogEntry(c, t?.version);
      return t !== undefined && pinned?.digest === t.digest ? pinned : undefined;
    }
    default: {
      const never: never = mode;
      return never;
    }
  }
}

export type TargetView =
  /** spec.version unset, or naming no catalog entry. */
  | { kind: "none" }
  /** spec.version's release. */
  | { kind: "spec"; target: ReleaseRef }
  /** A revert is in force for spec.version's release: the fleet goes to `target`. */
  | { kind: "revert"; target: ReleaseRef; from: ReleaseRef; revert: RevertRecord }
  /** spec.version names a revoked release and no revert is in force for it: no target. */
  | { kind: "revoked"; from: ReleaseRef; revoked: RevokedRelease };

/** The release the spec chooses in its trust mode (clusterTarget), before revert and revocation. */
export function specTarget(cluster: Cluster | undefined): ReleaseRef | undefined {
  return cluster === undefined ? undefined : clusterTarget(cluster);
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
