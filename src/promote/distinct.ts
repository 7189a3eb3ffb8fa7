// The distinct Clusters among the reads of a ring, pure. Contexts are not clusters: two contexts
// can reach one API server (a second ServiceAccount, another URL for the same control plane, a
// --context given twice), and each read of that one Cluster would otherwise count as a cluster
// of the ring and add its machines again, so the signed evidence would claim clusters that do
// not exist and meet the next ring's requireEvidence on them.
//
// A Cluster is named by its metadata.uid: the API server gives each object its own, so two reads
// with one uid are one object. The server URL is not part of the name on purpose: one control
// plane reached through two URLs (a load balancer and a node, an internal and an external name)
// would otherwise still count twice. Two control planes restored from one etcd backup would
// share uids and count once: the safe way for a gate to be wrong, and the line says which
// servers it read, so a person sees it. A read without a uid (no API server leaves one out) can
// only be named by its server and name.
import type { ClusterRead } from "./read.js";

export interface DistinctReads {
  /** One read per distinct Cluster, in the order the first of its contexts was given. */
  reads: ClusterRead[];
  /** One line per Cluster read through more than one context: which contexts, counted once. */
  same: string[];
}

/** The key the reads of one Cluster share, and how a line names it. */
function identity(r: ClusterRead): { key: string; shown: string } {
  const uid = r.cluster.metadata.uid;
  if (uid === undefined || uid === "")
    return { key: `server ${r.server} name ${r.cluster.metadata.name}`, shown: "no uid" };
  return { key: `uid ${uid}`, shown: `uid ${uid}` };
}

const through = (r: ClusterRead): string => `${r.context} (${r.server})`;

/**
 * The reads with each Cluster once. Of several reads of one Cluster the latest is kept (ties: the
 * first given): its status.evidence only grows and its times are written once, so the latest
 * read holds all an earlier one does, a revert or a recall included.
 */
export function distinctClusters(reads: readonly ClusterRead[]): DistinctReads {
  const groups = new Map<string, ClusterRead[]>();
  for (const r of reads) {
    const { key } = identity(r);
    groups.set(key, [...(groups.get(key) ?? []), r]);
  }
  const out: DistinctReads = { reads: [], same: [] };
  for (const group of groups.values()) {
    const kept = group.reduce((a, b) => (b.readAt.getTime() > a.readAt.getTime() ? b : a));
    out.reads.push(kept);
    if (group.length === 1) continue;
    out.same.push(
      `contexts ${group.map(through).join(", ")} read the same Cluster ${kept.cluster.metadata.name} (${identity(kept).shown}): it counts once, as read through ${kept.context}`,
    );
  }
  return out;
}
