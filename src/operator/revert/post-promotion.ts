// The post-promotion health rule of the automatic revert: a machine that promoted a release
// and whose health gates (spec.health), run again after promotion, then failed on it counts
// as a failure of that release, as a failed trial does (issue 27: "failed trials or failed
// post-promotion health checks reach N or P%"). Pure: the agent writes the verdict on its
// Machine status, this reads it.
import type { Machine, ReleaseRef } from "../../api/types.js";
import { failedTrialOf, type FailedTrial } from "../turns/brake.js";

/** A machine's failure of a release: its failed trial, or its failed post-promotion health. */
export interface ReleaseFailure extends FailedTrial {
  /** The gate that tripped (post-promotion health only). */
  gate?: string;
}

export const POST_PROMOTION_HEALTH_FAILED = "PostPromotionHealthFailed";

/**
 * The machine's last post-promotion health run failed on `r` (same version and digest: the
 * verdict names the release it judged, so one about an older release never counts).
 */
export function healthFailureOf(m: Machine, r: ReleaseRef): ReleaseFailure | undefined {
  const h = m.status?.postPromotionHealth;
  if (h === undefined || h.result !== "Failed") return undefined;
  if (h.version !== r.version || h.digest !== r.digest) return undefined;
  return {
    machine: m.metadata.name,
    reason: POST_PROMOTION_HEALTH_FAILED,
    at: h.at,
    ...(h.gate === undefined ? {} : { gate: h.gate }),
    ...(h.message === undefined ? {} : { message: h.message }),
  };
}

/** The machine failed `r`: a failed trial first (it is the earlier evidence), else its health. */
export function releaseFailureOf(m: Machine, r: ReleaseRef): ReleaseFailure | undefined {
  return failedTrialOf(m, r) ?? healthFailureOf(m, r);
}
