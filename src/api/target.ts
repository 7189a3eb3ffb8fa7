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
import type { Cluster, ReleaseRef, TrustMode } from "./types.js";

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
