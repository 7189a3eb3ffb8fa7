// Until when a Cluster's evidence was watched, pure. The soak is "ran without a revert", and only
// the Cluster's operator writes a revert (or a failed trial, or a recall) into status.evidence:
// once it stops, the evidence stops changing, and a soak read as (now - firstProvenAt) would keep
// growing over days nobody watched, until a dead ring met any soak the policy asks.
//
// The operator writes status.channel.lastCheckTime on each read of the channel (every 5 minutes
// by default, src/operator/channel), whether or not the read succeeds, so it is the last time a
// live operator wrote this status: the soak ends there, or at the read if that came first. A
// live operator makes it end at most one channel interval early, the safe way to be wrong.
import type { ClusterRead } from "./read.js";

export interface Watched {
  /** Where the soak ends. */
  until: Date;
  /** When the operator last wrote the status, if that is what ended the soak. */
  lastLooked?: string;
}

export function watchedUntil(r: ClusterRead): Watched {
  const last = r.cluster.status?.channel?.lastCheckTime;
  const at = last === undefined ? Number.NaN : Date.parse(last);
  // No lastCheckTime: no operator that polls a channel wrote this status; as read, then.
  if (Number.isNaN(at) || at >= r.readAt.getTime()) return { until: r.readAt };
  return { until: new Date(at), lastLooked: last };
}
