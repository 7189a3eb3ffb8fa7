// Whether to revert now: a person's request (spec.rollout.revertRequest), or the threshold a
// person set (spec.rollout.revert: failed trials, failed post-promotion health, a Prometheus
// check failing failureLimit times in a row) while the release is watched.
import {
  DEFAULT_PROMETHEUS_FAILURE_LIMIT,
  DEFAULT_REVERT_WATCH_SECONDS,
  sameRelease,
  type Machine,
  type ReleaseRef,
  type RevertReason,
} from "../../api/index.js";
import {
  POST_PROMOTION_HEALTH_FAILED,
  releaseFailureOf,
  type ReleaseFailure,
} from "./post-promotion.js";
import { forgiven } from "../../release-decision/forgiven.js";
import { type RevertInput, type RevertOutcome, type Trigger } from "./input.js";

export function requested(i: RevertInput, from: ReleaseRef): Trigger | undefined {
  const r = i.cluster.spec.rollout?.revertRequest;
  if (r === undefined || !sameRelease(r, from)) return undefined;
  const why = r.reason ? `: ${r.reason}` : "";
  return {
    trigger: "Request",
    reason: "RevertedByRequest",
    message: `${r.by} asked to revert ${from.version} at ${r.at}${why}`,
  };
}

/** Whether `from` is watched: before it became the last known good, and watchSeconds after. */
export function watched(i: RevertInput, from: ReleaseRef): boolean {
  const p = i.cluster.spec.rollout?.revert;
  if (p === undefined) return false;
  const lkg = i.cluster.status?.lastKnownGood;
  const watch = p.watchSeconds ?? DEFAULT_REVERT_WATCH_SECONDS;
  return !(sameRelease(lkg, from) && i.now.getTime() > Date.parse(lkg!.since) + watch * 1000);
}

/**
 * spec.rollout.revert, while `from` is watched: failed machines of it (failed trials, brake.ts's
 * failedTrialOf, or failed post-promotion health, post-promotion.ts) reach maxFailures, or
 * maxFailurePercent of the machines that took it; or its Prometheus check failed failureLimit
 * times in a row.
 */
export function automatic(i: RevertInput, from: ReleaseRef): Trigger | undefined {
  if (!watched(i, from)) return undefined; // good for longer than the window: not by itself
  return trialTrigger(i, from) ?? queryTrigger(i, from);
}

export function trialTrigger(i: RevertInput, from: ReleaseRef): Trigger | undefined {
  const p = i.cluster.spec.rollout?.revert ?? {};
  // What a person forgave (an unrevoke, a resume --failed-release) is not counted again.
  const failed = i.machines
    .flatMap((m) => releaseFailureOf(m, from) ?? [])
    .filter((f) => !forgiven(i.cluster, from, f));
  if (failed.length === 0) return undefined;
  const took = i.machines.filter((m) => tookIt(m, from)).length;
  const percent = took === 0 ? 0 : (failed.length * 100) / took;
  const byCount = (p.maxFailures ?? 0) > 0 && failed.length >= p.maxFailures!;
  const byShare = p.maxFailurePercent !== undefined && percent >= p.maxFailurePercent;
  if (!byCount && !byShare) return undefined;
  const rule = byCount
    ? `spec.rollout.revert.maxFailures ${p.maxFailures}`
    : `spec.rollout.revert.maxFailurePercent ${p.maxFailurePercent}`;
  const gate = gateOf(failed);
  return {
    trigger: "Automatic",
    reason: failureReasonOf(failed),
    message:
      `${failed.length} of ${took} machine(s) that took ${from.version} failed (${rule}), ` +
      `gate ${gate}: ${failedNames(failed)}`,
    gate,
  };
}

/**
 * The condition's reason names the kind of evidence that reached the threshold: failed trials
 * only, failed post-promotion health gates only, or both together (RevertedAutomatically).
 */
export function failureReasonOf(failed: readonly ReleaseFailure[]): RevertReason {
  const health = failed.filter((f) => f.reason === POST_PROMOTION_HEALTH_FAILED).length;
  if (health === failed.length) return "RevertedOnHealthGate";
  if (health === 0) return "RevertedOnFailedTrials";
  return "RevertedAutomatically";
}

/**
 * The gate that tripped: the one most failures name (the earliest named first on a tie), a
 * health gate by its name and a failed trial as `trial <its reason>` (a trial's own gate
 * failure reads `trial HealthCheckFailed`; the message has the rest).
 */
export function gateOf(failed: readonly ReleaseFailure[]): string {
  const counts = new Map<string, number>();
  for (const f of failed) {
    const g =
      f.reason === POST_PROMOTION_HEALTH_FAILED ? (f.gate ?? "health") : `trial ${f.reason}`;
    counts.set(g, (counts.get(g) ?? 0) + 1);
  }
  let best = "";
  let most = 0;
  for (const [g, n] of counts) {
    if (n > most) [best, most] = [g, n];
  }
  return best;
}

export function queryTrigger(i: RevertInput, from: ReleaseRef): Trigger | undefined {
  const q = i.cluster.spec.rollout?.revert?.prometheus;
  const seen = i.queryChecks?.get(from.digest);
  if (q === undefined || seen === undefined) return undefined;
  const limit = q.failureLimit ?? DEFAULT_PROMETHEUS_FAILURE_LIMIT;
  // Failed checks a person forgave (an unrevoke after them) are not counted again.
  const failures =
    seen.failedAt === undefined
      ? seen.failures
      : seen.failedAt.filter((at) => !forgiven(i.cluster, from, { machine: "", at })).length;
  if (failures < limit) return undefined;
  return {
    trigger: "Automatic",
    reason: "RevertedOnPrometheusQuery",
    gate: "prometheus",
    message:
      `the Prometheus check of ${from.version} failed ${failures} time(s) in a row ` +
      `(spec.rollout.revert.prometheus.failureLimit ${limit}): query ${q.query} at ${q.url} ` +
      `last ${seen.last}`,
  };
}

/** The Prometheus check to run for the target now, when one is configured and it is watched. */
export function queryWantedOf(i: RevertInput, from: ReleaseRef): RevertOutcome["queryWanted"] {
  const q = i.cluster.spec.rollout?.revert?.prometheus;
  if (q === undefined || !watched(i, from)) return undefined;
  return { release: from, check: q };
}

/** The machine took the release: it failed it, tried it, or runs it. */
export function tookIt(m: Machine, r: ReleaseRef): boolean {
  const s = m.status ?? {};
  if (releaseFailureOf(m, r) !== undefined) return true;
  if (s.lastTrial !== undefined && sameRelease(s.lastTrial, r)) return true;
  return s.version === r.version;
}

export function failedNames(failed: readonly ReleaseFailure[]): string {
  const shown = failed
    .slice(0, 10)
    .map(
      (f) =>
        `${f.machine} (${f.reason}${f.gate === undefined ? "" : ` gate ${f.gate}`}, at ${f.at})`,
    );
  const more = failed.length > 10 ? ` and ${failed.length - 10} more` : "";
  return shown.join(", ") + more;
}
