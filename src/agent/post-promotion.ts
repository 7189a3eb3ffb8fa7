// Post-promotion health: after a machine promoted a release, its health gates (spec.health,
// health.ts) run again on a schedule while spec.rollout.revert watches the release, and the
// verdict, naming this boot and the release, goes on the Machine's status
// (status.postPromotionHealth). cluster-operator counts a Failed verdict as a failure of the
// release towards the automatic revert's threshold (src/operator/revert/post-promotion.ts). Pure:
// when to run (postPromotionStep) and what to write (verdictOf); running the gates is
// health-run.ts's HealthGates.check.
import {
  DEFAULT_PROMETHEUS_INTERVAL_SECONDS,
  DEFAULT_REVERT_WATCH_SECONDS,
  type Cluster,
  type PostPromotionHealth,
  type ReleaseRef,
  sameRelease,
} from "../api/types.js";
import type { HealthCheck } from "./health.js";

/**
 * How often the gates run again: the Prometheus check's default interval, so both signals of
 * a release going bad after promotion arrive at the same pace.
 */
export const POST_PROMOTION_INTERVAL_MS = DEFAULT_PROMETHEUS_INTERVAL_SECONDS * 1000;

export interface PostPromotionInput {
  /** The release this boot runs, promoted (not on a trial boot). */
  running: ReleaseRef;
  /** This boot's id (/proc/sys/kernel/random/boot_id). */
  bootID: string;
  cluster: Cluster | undefined;
  /** How many gates are configured (gateNames). */
  gates: number;
  /** The verdict on the Machine's status now, if any. */
  last: PostPromotionHealth | undefined;
  /** The wall clock, ms (the agent's clock seam). */
  now: number;
}

export type PostPromotionStep = { kind: "run"; why: string } | { kind: "idle"; why: string };

export function postPromotionStep(i: PostPromotionInput): PostPromotionStep {
  return watchedStep(i) ?? freshStep(i);
}

/** Idle when nothing watches the running release now; undefined when it is watched. */
function watchedStep(i: PostPromotionInput): PostPromotionStep | undefined {
  const policy = i.cluster?.spec.rollout?.revert;
  if (policy === undefined) return { kind: "idle", why: "no spec.rollout.revert: nothing watches" };
  if (i.gates === 0) return { kind: "idle", why: "no health gate configured" };
  const lkg = i.cluster?.status?.lastKnownGood;
  if (lkg !== undefined && sameRelease(lkg, i.running)) {
    const until =
      Date.parse(lkg.since) + (policy.watchSeconds ?? DEFAULT_REVERT_WATCH_SECONDS) * 1000;
    if (i.now > until) {
      return { kind: "idle", why: `${i.running.version} is past its watch window` };
    }
    return undefined;
  }
  if (i.cluster?.spec.version === i.running.version) return undefined;
  return {
    kind: "idle",
    why: `${i.running.version} is neither the target nor the last known good`,
  };
}

/** Run when the status holds no verdict on this release for this boot, or an old one. */
function freshStep(i: PostPromotionInput): PostPromotionStep {
  const l = i.last;
  if (l === undefined || !sameRelease(l, i.running) || l.bootID !== i.bootID) {
    // Fresh evidence: a verdict about another release or another boot says nothing of this one.
    return { kind: "run", why: `no verdict yet on ${i.running.version} for this boot` };
  }
  const since = i.now - Date.parse(l.at);
  if (since >= POST_PROMOTION_INTERVAL_MS) {
    return {
      kind: "run",
      why: `the last check of ${i.running.version} is ${Math.round(since / 1000)} s old`,
    };
  }
  return { kind: "idle", why: `checked ${Math.round(since / 1000)} s ago` };
}

/** The status verdict of one run of the gates on this boot of `running`, at wall time `at`. */
export function verdictOf(
  check: HealthCheck,
  running: ReleaseRef,
  bootID: string,
  at: string,
): PostPromotionHealth {
  const base = { version: running.version, digest: running.digest, bootID, at };
  if (check.failed === undefined) return { ...base, result: "Passed" };
  return { ...base, result: "Failed", gate: check.failed.gate, message: check.failed.output };
}
