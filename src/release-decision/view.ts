// The release a Cluster's machines move to: the one place that reads it, for the agent
// (observe.ts) and the operator (machine-view.ts, decide.ts) alike. The decision itself
// (spec or follow, the channel's trust and freshness, recalls, revocations, the revert in
// force) is src/release-decision/decide.ts; this file reads it off a Cluster.
//   pinned          spec.version's catalog entry (the page's flow, unchanged);
//   channel         status.trust.target: the release the signed channel vouches for, written by
//                   cluster-operator after its TUF client verified it (and, with follow, once
//                   the Cluster's wave opened); spec.version, when set, must name it;
//   channel+pinned  both: the channel's target, only when the catalog names the same version
//                   with the same digest (two parties must agree).
// A trust status made from another pinned root than the spec's counts for nothing: a new pin
// starts the trust anew, and until then nothing moves. docs/revert.md and docs/releases.md
// state the rules; test/unit/release-decide.test.ts has the table.
import {
  type Cluster,
  type ReleaseRef,
  type RevertRecord,
  type RevokedRelease,
  type TrustMode,
} from "../api/types.js";
import { decideRelease, revocationOf, type Hold } from "./decide.js";
import { chosenOf, releaseInputOf } from "./input.js";

export function trustModeOf(c: Cluster): TrustMode {
  return c.spec.releases.trust?.mode ?? "pinned";
}

/** What the signed channel vouches for now (status.trust.target), when made from this spec's pin. */
export function channelTarget(c: Cluster): ReleaseRef | undefined {
  const spec = c.spec.releases.trust;
  const st = c.status?.trust;
  if (spec === undefined || st?.target === undefined) return undefined;
  if (st.rootDigest !== spec.rootDigest) return undefined;
  if (spec.follow === undefined && st.target.version !== c.spec.version) return undefined;
  return { version: st.target.version, digest: st.target.digest };
}

/** The Cluster's chosen release (version and the digest that starts the chain), if any. */
export function clusterTarget(c: Cluster): ReleaseRef | undefined {
  return chosenOf(c);
}

export type TargetView =
  /** Nothing chosen: spec.version unset or naming no catalog entry, nothing followed yet. */
  | { kind: "none" }
  /** The chosen release. */
  | { kind: "spec"; target: ReleaseRef }
  /** A revert is in force for the chosen release: the fleet goes to `target`. */
  | { kind: "revert"; target: ReleaseRef; from: ReleaseRef; revert: RevertRecord }
  /** The chosen release is revoked and no revert is in force for it: no target. */
  | { kind: "revoked"; from: ReleaseRef; revoked: RevokedRelease }
  /** Held by another rule of the decision (recall, trust, floor): no target; `revert` waits. */
  | { kind: "held"; from: ReleaseRef; hold: Hold; revert?: RevertRecord };

/** The release the spec (or follow) chooses in its trust mode, before the decision's rules. */
export function specTarget(cluster: Cluster | undefined): ReleaseRef | undefined {
  return cluster === undefined ? undefined : chosenOf(cluster);
}

export function revokedOf(
  cluster: Cluster | undefined,
  r: ReleaseRef | undefined,
): RevokedRelease | undefined {
  return revocationOf(cluster?.status?.revokedReleases ?? [], r);
}

/** The decision on this Cluster; `now` (the operator's clock) also judges the trust's expiry. */
export function targetView(cluster: Cluster | undefined, now?: Date): TargetView {
  if (cluster === undefined) return { kind: "none" };
  const d = decideRelease(releaseInputOf(cluster, now));
  switch (d.kind) {
    case "none":
      return d;
    case "take":
      return d.revert === undefined
        ? { kind: "spec", target: d.release }
        : { kind: "revert", target: d.release, from: d.chosen, revert: d.revert };
    case "hold":
      if (d.hold.rule === "Revoked" && d.revoked !== undefined) {
        return { kind: "revoked", from: d.chosen, revoked: d.revoked };
      }
      return {
        kind: "held",
        from: d.chosen,
        hold: d.hold,
        ...(d.revert === undefined ? {} : { revert: d.revert }),
      };
    default: {
      const never: never = d;
      throw new Error(`unknown release decision ${JSON.stringify(never)}`);
    }
  }
}

/** The release every machine moves to now; undefined: none (unset, revoked, held). */
export function effectiveTarget(cluster: Cluster | undefined, now?: Date): ReleaseRef | undefined {
  const v = targetView(cluster, now);
  switch (v.kind) {
    case "none":
    case "revoked":
    case "held":
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
