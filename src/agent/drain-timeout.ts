// A drain that does not finish (a PodDisruptionBudget that never allows the eviction, a pod
// stuck terminating): how long the agent drains for one turn, and what it does at the end.
// The Cluster says (spec.disruption.drainTimeoutSeconds, onDrainTimeout); the agent's own
// config can only shorten the time (tests do), never lengthen it.
//
//   Stall (default, the page's behaviour): the node stays cordoned, the turn stays held, the
//     drain starts again on the next tick, and the operator's turn deadline stalls the rollout.
//   Skip: uncordon, give this turn back (the operator sees status.drainTimedOut naming the
//     turn's grantedAt), ask again at the back of the queue.
import {
  DEFAULT_DRAIN_TIMEOUT_SECONDS,
  type Cluster,
  type DrainBlocker,
  type DrainTimedOut,
  type ReleaseRef,
} from "../api/types.js";

export interface DrainLimits {
  timeoutMs: number;
  skip: boolean;
}

export function drainLimits(cluster: Cluster | undefined, configMs: number): DrainLimits {
  const d = cluster?.spec.disruption;
  const clusterMs = (d?.drainTimeoutSeconds ?? DEFAULT_DRAIN_TIMEOUT_SECONDS) * 1000;
  return { timeoutMs: Math.min(configMs, clusterMs), skip: d?.onDrainTimeout === "Skip" };
}

/** What the agent reports after it gave a turn back on a drain timeout. */
export function drainTimedOutRecord(
  release: ReleaseRef,
  turnGrantedAt: string,
  blocker: DrainBlocker | undefined,
  message: string,
  at: string,
): DrainTimedOut {
  return {
    version: release.version,
    digest: release.digest,
    turnGrantedAt,
    at,
    ...(blocker === undefined ? {} : { pod: blocker.pod }),
    ...(blocker?.podDisruptionBudget === undefined
      ? {}
      : { podDisruptionBudget: blocker.podDisruptionBudget }),
    message: message.slice(0, 4096),
  };
}

/**
 * Whether a turn record is the one this machine already gave back on a drain timeout: the
 * agent must not drain again on it while the operator has not yet taken it back.
 */
export function isSkippedTurn(
  turnGrantedAt: string | undefined,
  skipped: DrainTimedOut | undefined,
): boolean {
  return turnGrantedAt !== undefined && skipped?.turnGrantedAt === turnGrantedAt;
}
