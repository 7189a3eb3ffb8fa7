// Fleet-wide revert, pure: which release is known good, whether to revert now (a person's
// spec.rollout.revertRequest, or spec.rollout.revert's threshold) and where to. Whether it may
// go there (recalls, revocations, the floor the release declares) is the release decision's
// (src/target/decide.ts): a revert is proposed to it with the floor as read. The revert itself is a target change (src/target/view.ts): the
// turns, the budget, the leader rule, the drain and the brakes of decide.ts apply to it as to a
// forward rollout. All I/O (reading a release's floor, the guarded status write that is the
// revert's lock, Events, metrics) lives in operator.ts; docs/revert.md states the rules and
// test/unit/operator-revert.test.ts has the tables.
import {
  DEFAULT_PROMETHEUS_FAILURE_LIMIT,
  DEFAULT_REVERT_WATCH_SECONDS,
  type PrometheusCheck,
  REVOKED_RELEASES_MAX_ITEMS,
  sameRelease,
  type Cluster,
  type ClusterCondition,
  type KnownGood,
  type Machine,
  type ReleaseRef,
  type RevertRecord,
  type RevertReason,
  type RevokedRelease,
} from "../../api/index.js";
import { targetView, type TargetView } from "../../target/view.js";
import { rfc3339 } from "../../api/time.js";
import { truncate } from "../../api/bounds.js";
import {
  POST_PROMOTION_HEALTH_FAILED,
  releaseFailureOf,
  type ReleaseFailure,
} from "./post-promotion.js";
import type { QueryCheckView } from "./prom-check.js";
import { decideRelease, withdrawnWhy, type FloorRead } from "../../target/decide.js";
import { releaseInputOf } from "../../target/input.js";
import { forgiven } from "../../target/forgiven.js";

export type { FloorRead } from "../../target/decide.js";

export interface RevertInput {
  cluster: Cluster;
  machines: readonly Machine[];
  /** Every turn held after this decision's releases and grants. */
  turns: readonly { machine: string }[];
  /** Whether the failure brake holds for the target (a release that failed is not good). */
  brakeHeld: boolean;
  lost: ReadonlySet<string>;
  now: Date;
  identity: string;
  floors: ReadonlyMap<string, FloorRead>;
  /** The Prometheus checks of spec.rollout.revert.prometheus so far, by release digest. */
  queryChecks?: ReadonlyMap<string, QueryCheckView>;
}

export type RevertCondition = Extract<ClusterCondition, { type: "Reverted" }>;

/** A revert in force given a new target: the record as it is now, the target it had, and why. */
export interface Retarget {
  revert: RevertRecord;
  was: ReleaseRef;
  why: string;
}

export interface RevertOutcome {
  lastKnownGood: KnownGood | undefined;
  priorKnownGood: KnownGood | undefined;
  revokedReleases: RevokedRelease[] | undefined;
  revert: RevertRecord | undefined;
  /** The Reverted condition to record; undefined: none (and none is removed). */
  condition: Omit<RevertCondition, "lastTransitionTime"> | undefined;
  /** A revert that begins with this decision: an Event and a metric once it is written. */
  started: RevertRecord | undefined;
  /**
   * A revert in force sent to another release with this decision (its target was recalled or
   * revoked since): the same revert, so its own Event, and not counted as a revert again.
   */
  retargeted?: Retarget | undefined;
  /** The release whose floor the operator must read before a revert of it can be decided. */
  floorWanted: ReleaseRef | undefined;
  /** The Prometheus check the operator runs (when its interval passed) for the target. */
  queryWanted?: { release: ReleaseRef; check: PrometheusCheck } | undefined;
}

export function revertOf(input: RevertInput): RevertOutcome {
  // A person's unrevoke applies first: the rest decides on the Cluster without what it cleared.
  const i: RevertInput = { ...input, cluster: withoutUnrevoked(input.cluster) };
  const status = i.cluster.status ?? {};
  const view = targetView(i.cluster);
  const known = knownGoodOf(i, view);
  const base: RevertOutcome = {
    ...known,
    revokedReleases: status.revokedReleases,
    // Kept while in force (also while it waits on a hold); once spec.version moved on, the
    // Reverted condition (reason RevertSuperseded) tells the story, and the release left stays
    // revoked.
    revert: view.kind === "revert" || view.kind === "held" ? view.revert : undefined,
    condition: undefined,
    started: undefined,
    floorWanted: undefined,
  };
  switch (view.kind) {
    case "none":
      return { ...base, condition: endedCondition(i, status.revert) };
    case "revert":
      return { ...base, condition: inForceCondition(view.revert) };
    case "revoked":
      return { ...base, condition: endedCondition(i, status.revert) };
    case "spec":
      return { ...wantRevert(i, view.target, base), queryWanted: queryWantedOf(i, view.target) };
    case "held":
      return heldRevert(i, view, base);
    default: {
      const never: never = view;
      throw new Error(`unknown target view ${JSON.stringify(never)}`);
    }
  }
}

/**
 * The release decision holds the chosen release (src/target/decide.ts). A revert in
 * force whose target the channel recalled or the Cluster revoked since goes to the newest
 * proven release neither recalled nor revoked (within the floor); with none, it stays recorded
 * and says why (RevertHeld). A revert held by the channel's trust waits for it, and says so. A
 * release the channel recalled may still be reverted, by a person or by the threshold: a recall
 * stops turns for it, not the way back from it.
 */
function heldRevert(
  i: RevertInput,
  view: Extract<TargetView, { kind: "held" }>,
  base: RevertOutcome,
): RevertOutcome {
  const r = view.revert;
  if (r === undefined) {
    if (REVERTIBLE.has(view.hold.rule)) return wantRevert(i, view.from, base);
    return { ...base, condition: endedCondition(i, i.cluster.status?.revert) };
  }
  if (view.hold.rule !== "RevertTargetWithdrawn") {
    return { ...base, condition: cond("False", "RevertHeld", `${view.hold.message}.`) };
  }
  const to = revertTargetOf(i.cluster, view.from);
  const trigger: Trigger = {
    trigger: r.trigger,
    reason: recordReasonOf(r),
    message: r.message,
    ...(r.gate === undefined ? {} : { gate: r.gate }),
  };
  if (to === undefined) {
    return { ...base, condition: cond("False", "RevertHeld", view.hold.message) };
  }
  const held = floorHold(i, view.from, to, trigger);
  if (held !== undefined) {
    const msg = `${view.hold.message} The next proven release, ${to.version}, waits: ${held.condition?.message ?? ""}`;
    return { ...base, floorWanted: held.floorWanted, condition: cond("False", "RevertHeld", msg) };
  }
  const why = withdrawnWhy(releaseInputOf(i.cluster), r.to) ?? "";
  const retargeted: RevertRecord = {
    ...r,
    to: { version: to.version, digest: to.digest },
    message: truncate(
      `${r.message}; retargeted from ${r.to.version} to ${to.version}: ${why}`,
      REVERT_MESSAGE_MAX,
    ),
    at: rfc3339(i.now),
  };
  return {
    ...base,
    revert: retargeted,
    condition: inForceCondition(retargeted),
    retargeted: { revert: retargeted, was: r.to, why },
  };
}

/**
 * The holds whose message names `liken rollout revert` as the way out, with the held release as
 * the one to leave: a revert of it is decided as for a release in force (a person's request, or
 * the threshold). Every hold's named action must work (issue 48: NotVouched named it, and the
 * request was dropped with nothing said).
 */
const REVERTIBLE: ReadonlySet<string> = new Set(["Recalled", "NotVouched"]);

/**
 * spec.rollout.unrevoke clears what was revoked, reverted or requested for exactly its release
 * before its `at`: the revoked entry, the revert record, and the request (ignored).
 */
export function withoutUnrevoked(c: Cluster): Cluster {
  const u = c.spec.rollout?.unrevoke;
  if (u === undefined) return c;
  const before = (at: string): boolean => Date.parse(at) <= Date.parse(u.at);
  const cleared = (r: ReleaseRef & { at: string }): boolean => sameRelease(r, u) && before(r.at);
  const s = c.status ?? {};
  const revokedReleases = s.revokedReleases?.filter((r) => !cleared(r));
  const revert = s.revert !== undefined && sameRelease(s.revert.from, u) && before(s.revert.at);
  const req = c.spec.rollout?.revertRequest;
  const { revertRequest: _req, ...rollout } = c.spec.rollout ?? {};
  const spec = req !== undefined && cleared(req) ? { ...c.spec, rollout } : c.spec;
  const { revert: _revert, ...rest } = s;
  const status = {
    ...(revert ? rest : s),
    ...(revokedReleases === undefined ? {} : { revokedReleases }),
  };
  return { ...c, spec, status };
}

// ---------------------------------------------------------------------------------------
// Known good.

/**
 * The target is known good once every machine runs it and is Ready (none Lost), no turn is
 * held (so every soak is over) and the brake does not hold. The release it replaces as
 * lastKnownGood becomes priorKnownGood, unless it was revoked since.
 */
function knownGoodOf(
  i: RevertInput,
  view: TargetView,
): Pick<RevertOutcome, "lastKnownGood" | "priorKnownGood"> {
  const s = i.cluster.status ?? {};
  const kept = { lastKnownGood: s.lastKnownGood, priorKnownGood: s.priorKnownGood };
  if (view.kind !== "spec" && view.kind !== "revert") return kept;
  const t = view.target;
  if (sameRelease(s.lastKnownGood, t) || !settledOn(i, t)) return kept;
  const usable = (k: KnownGood | undefined): KnownGood | undefined =>
    k !== undefined && !sameRelease(k, t) && !isRevoked(i.cluster, k) ? k : undefined;
  const prior = usable(s.lastKnownGood) ?? usable(s.priorKnownGood);
  return {
    lastKnownGood: { version: t.version, digest: t.digest, since: rfc3339(i.now) },
    priorKnownGood: prior,
  };
}

function settledOn(i: RevertInput, t: ReleaseRef): boolean {
  if (i.machines.length === 0 || i.turns.length > 0 || i.brakeHeld) return false;
  return i.machines.every((m) => {
    const s = m.status ?? {};
    const digestOk = s.digest === undefined || s.digest === t.digest;
    return (
      s.version === t.version && digestOk && s.step === "Ready" && !i.lost.has(m.metadata.name)
    );
  });
}

function isRevoked(c: Cluster, r: ReleaseRef): boolean {
  return (c.status?.revokedReleases ?? []).some((x) => sameRelease(x, r));
}

/**
 * Where a revert of `from` goes: the newest proven release (status.lastKnownGood, then
 * status.priorKnownGood) that is not `from`, and that the channel did not recall nor the
 * Cluster revoke (the release decision's rule: no turn for either, a revert's included).
 */
export function revertTargetOf(c: Cluster, from: ReleaseRef): KnownGood | undefined {
  const s = c.status ?? {};
  const input = releaseInputOf(c);
  for (const k of [s.lastKnownGood, s.priorKnownGood]) {
    if (k !== undefined && !sameRelease(k, from) && withdrawnWhy(input, k) === undefined) return k;
  }
  return undefined;
}

/** The proven releases a revert of `from` cannot go to, and why (for NoKnownGood's message). */
function withdrawnProven(c: Cluster, from: ReleaseRef): string {
  const s = c.status ?? {};
  const input = releaseInputOf(c);
  const why = [s.lastKnownGood, s.priorKnownGood]
    .filter((k): k is KnownGood => k !== undefined && !sameRelease(k, from))
    .map((k) => withdrawnWhy(input, k))
    .filter((w): w is string => w !== undefined);
  return why.length === 0 ? "" : ` (${why.join("; ")})`;
}

// ---------------------------------------------------------------------------------------
// Whether to revert now.

/** What tripped a revert: who, the condition's reason, and the gate (automatic ones only). */
type Trigger = {
  trigger: RevertRecord["trigger"];
  reason: RevertReason;
  message: string;
  gate?: string;
};

function wantRevert(i: RevertInput, from: ReleaseRef, base: RevertOutcome): RevertOutcome {
  const request = i.cluster.spec.rollout?.revertRequest;
  const stale =
    request !== undefined && !sameRelease(request, from) && !isRevoked(i.cluster, request);
  const trigger = requested(i, from) ?? automatic(i, from);
  if (trigger === undefined) {
    if (stale) {
      const msg =
        `spec.rollout.revertRequest names ${request.version} (${request.digest}) but spec.version ` +
        `names ${from.version}: the newer spec.version is the target and nothing is reverted. ` +
        `To revert ${from.version}, run \`liken rollout revert ${i.cluster.metadata.name}\` again.`;
      return { ...base, condition: cond("False", "RevertRequestStale", msg) };
    }
    return { ...base, condition: endedCondition(i, i.cluster.status?.revert) };
  }
  const to = revertTargetOf(i.cluster, from);
  if (to === undefined) {
    const msg =
      `${trigger.message}; but there is no last known good release other than ${from.version} ` +
      `that is neither recalled nor revoked${withdrawnProven(i.cluster, from)} ` +
      `(status.lastKnownGood, status.priorKnownGood): nothing to go back to. Set spec.version to ` +
      `a release you trust (kubectl edit cluster ${i.cluster.metadata.name}).`;
    return { ...base, condition: cond("False", "NoKnownGood", msg) };
  }
  const held = floorHold(i, from, to, trigger);
  if (held !== undefined) return { ...base, ...held };
  const revert: RevertRecord = {
    from: { version: from.version, digest: from.digest },
    to: { version: to.version, digest: to.digest },
    trigger: trigger.trigger,
    message: truncate(trigger.message, REVERT_MESSAGE_MAX),
    reason: trigger.reason,
    ...(trigger.gate === undefined ? {} : { gate: truncate(trigger.gate, REVERT_GATE_MAX) }),
    by:
      trigger.trigger === "Request"
        ? (i.cluster.spec.rollout?.revertRequest?.by ?? "")
        : i.identity,
    at: rfc3339(i.now),
  };
  const revoked: RevokedRelease = {
    version: from.version,
    digest: from.digest,
    reason: trigger.reason,
    message: revert.message,
    at: revert.at,
  };
  return {
    ...base,
    revert,
    revokedReleases: withRevoked(base.revokedReleases, revoked),
    condition: inForceCondition(revert),
    started: revert,
  };
}

/**
 * Asks the release decision whether the revert `from` → `to` may go, with the floor `from`
 * declares as read (not read yet: `reading`, and the operator is asked to read it). A hold (the
 * floor not known, or above `to`) holds the revert back and says why; undefined: go.
 */
function floorHold(
  i: RevertInput,
  from: ReleaseRef,
  to: ReleaseRef,
  trigger: Trigger,
): Pick<RevertOutcome, "condition" | "floorWanted"> | undefined {
  const proposed: RevertRecord = {
    from: { version: from.version, digest: from.digest },
    to: { version: to.version, digest: to.digest },
    trigger: trigger.trigger,
    message: trigger.message,
    by: i.identity,
    at: rfc3339(i.now),
  };
  const floor = i.floors.get(from.digest) ?? { kind: "reading" };
  const d = decideRelease({
    ...releaseInputOf(i.cluster),
    chosen: proposed.from,
    revert: proposed,
    floor,
  });
  if (d.kind !== "hold") return undefined;
  const said = d.hold.message.replaceAll("CLUSTER", i.cluster.metadata.name);
  const msg = `${trigger.message}; ${floor.kind === "reading" ? "" : "but "}${said}`;
  if (d.hold.rule === "RevertFloorUnread") {
    return { condition: cond("False", "RevertFloorUnread", msg), floorWanted: from };
  }
  // RevertBelowFloor; or another rule of the decision (not met on a release it may revert).
  const reason = d.hold.rule === "RevertBelowFloor" ? "RevertBelowFloor" : "RevertHeld";
  return { condition: cond("False", reason, msg), floorWanted: undefined };
}

/** The revert record's and the revoked entry's message: the CRD's bound. */
export const REVERT_MESSAGE_MAX = 4096;
/** status.revert.gate: the CRD's bound, as status.postPromotionHealth.gate's (a gate's name). */
export const REVERT_GATE_MAX = 128;

/**
 * The list with `r` added, newest last, at most REVOKED_RELEASES_MAX_ITEMS: the oldest
 * revocation leaves first (docs/revert.md says so; 64 reverts of one Cluster is years).
 */
function withRevoked(
  list: readonly RevokedRelease[] | undefined,
  r: RevokedRelease,
): RevokedRelease[] {
  const rest = (list ?? []).filter((x) => !sameRelease(x, r));
  return [...rest, r].slice(-REVOKED_RELEASES_MAX_ITEMS);
}

function requested(i: RevertInput, from: ReleaseRef): Trigger | undefined {
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

function trialTrigger(i: RevertInput, from: ReleaseRef): Trigger | undefined {
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

function queryTrigger(i: RevertInput, from: ReleaseRef): Trigger | undefined {
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
function queryWantedOf(i: RevertInput, from: ReleaseRef): RevertOutcome["queryWanted"] {
  const q = i.cluster.spec.rollout?.revert?.prometheus;
  if (q === undefined || !watched(i, from)) return undefined;
  return { release: from, check: q };
}

/** The machine took the release: it failed it, tried it, or runs it. */
function tookIt(m: Machine, r: ReleaseRef): boolean {
  const s = m.status ?? {};
  if (releaseFailureOf(m, r) !== undefined) return true;
  if (s.lastTrial !== undefined && sameRelease(s.lastTrial, r)) return true;
  return s.version === r.version;
}

function failedNames(failed: readonly ReleaseFailure[]): string {
  const shown = failed
    .slice(0, 10)
    .map(
      (f) =>
        `${f.machine} (${f.reason}${f.gate === undefined ? "" : ` gate ${f.gate}`}, at ${f.at})`,
    );
  const more = failed.length > 10 ? ` and ${failed.length - 10} more` : "";
  return shown.join(", ") + more;
}

// ---------------------------------------------------------------------------------------
// The Reverted condition.

function cond(
  status: RevertCondition["status"],
  reason: RevertReason,
  message: string,
): Omit<RevertCondition, "lastTransitionTime"> {
  return { type: "Reverted", status, reason, message };
}

function inForceCondition(r: RevertRecord): Omit<RevertCondition, "lastTransitionTime"> {
  return cond(
    "True",
    recordReasonOf(r),
    `reverting ${r.from.version} to ${r.to.version} (decided at ${r.at} by ${r.by}): ${r.message}. ` +
      `${r.from.version} is revoked: nothing takes it again until a person clears it ` +
      `(\`liken rollout unrevoke CLUSTER ${r.from.version}\`). Set spec.version to ${r.to.version} ` +
      `(or a newer good release) to end the revert.`,
  );
}

/** The reason a record was decided with (records written before it was kept: by trigger). */
export function recordReasonOf(r: RevertRecord): RevertReason {
  return r.reason ?? (r.trigger === "Request" ? "RevertedByRequest" : "RevertedAutomatically");
}

/** A revert recorded but no longer in force: spec.version moved on. */
function endedCondition(
  i: RevertInput,
  r: RevertRecord | undefined,
): Omit<RevertCondition, "lastTransitionTime"> | undefined {
  if (r === undefined) return undefined;
  const now = i.cluster.spec.version ?? "(none)";
  return cond(
    "False",
    "RevertSuperseded",
    `the revert of ${r.from.version} to ${r.to.version} (${r.at}) ended: spec.version names ${now} now, and that is the target`,
  );
}
