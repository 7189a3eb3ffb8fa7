// The channel's side of the Cluster status as the poller read it (poll.ts, trust.ts), handed
// to the decision (decide.ts) with each pass.
import type { ClusterCondition, ClusterStatus } from "../../api/index.js";

/** The channel's side of the status, from the poller (undefined: keep what is recorded). */
export interface ChannelView {
  available?: string;
  condition: Extract<ClusterCondition, { type: "ChannelReachable" }>;
  channel: NonNullable<ClusterStatus["channel"]>;
  /** The channel trust modes' verdict (trust.ts); absent in mode pinned. */
  trust?: {
    status: NonNullable<ClusterStatus["trust"]>;
    condition: Extract<ClusterCondition, { type: "ChannelTrusted" }>;
    /** Set when the metadata was refused: what, and of which role (metrics, Events). */
    fault?: { reason: string; role: string };
  };
}
