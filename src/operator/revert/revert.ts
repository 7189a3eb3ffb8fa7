// Fleet-wide revert, pure: which release is known good, whether to revert now (a person's
// spec.rollout.revertRequest, or spec.rollout.revert's threshold) and where to. Whether it may
// go there (recalls, revocations, the floor the release declares) is the release decision's
// (src/release-decision/decide.ts): a revert is proposed to it with the floor as read. The revert itself is a target change (src/release-decision/view.ts): the
// turns, the budget, the leader rule, the drain and the brakes of decide.ts apply to it as to a
// forward rollout. All I/O (reading a release's floor, the guarded status write that is the
// revert's lock, Events, metrics) lives in operator.ts; docs/revert.md states the rules and
// test/unit/operator-revert.test.ts has the tables.
import {
  REVOKED_RELEASES_MAX_ITEMS,
  sameRelease,
  type Cluster,
  type ReleaseRef,
  type RevertRecord,
  type RevokedRelease,
} from "../../api/index.js";
import { targetView, type TargetView } from "../../release-decision/view.js";
import { rfc3339 } from "../../api/time.js";
import { truncate } from "../../api/bounds.js";
import { decideRelease, withdrawnWhy } from "../../release-decision/decide.js";
import { releaseInputOf } from "../../release-decision/input.js";
import { type RevertInput, type RevertOutcome, type Trigger } from "./input.js";
import { isRevoked, knownGoodOf, revertTargetOf, withdrawnProven } from "./known-good.js";
import { automatic, queryWantedOf, requested } from "./triggers.js";
import { cond, endedCondition, inForceCondition, recordReasonOf } from "./condition.js";
import { recalledRunning } from "./running.js";

// The revert's parts, as the operator, the CLI and the tests name them.
export type { Retarget, RevertCondition, RevertInput, RevertOutcome } from "./input.js";
export { revertTargetOf } from "./known-good.js";
export { automatic, failureReasonOf, gateOf, watched } from "./triggers.js";
export { recordReasonOf } from "./condition.js";

export type { FloorRead } from "../../release-decision/decide.js";

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
      return noneChosen(i, base);
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
 * Nothing chosen. On a channel-mode Cluster that never took the release its machines run
 * because the channel recalled it first, that release is still what a revert leaves: the
 * revert is decided from what the Machines run (running.ts), as for a recall of a release
 * taken. Otherwise a revert recorded has ended.
 */
function noneChosen(i: RevertInput, base: RevertOutcome): RevertOutcome {
  const running = recalledRunning(i.cluster, i.machines);
  if (running !== undefined) return wantRevert(i, running, base);
  return { ...base, condition: endedCondition(i, i.cluster.status?.revert) };
}

/**
 * The release decision holds the chosen release (src/release-decision/decide.ts). A revert in
 * force whose target the channel recalled or the Cluster revoked since goes to the newest
 * proven release neither recalled nor revoked (within the floor); with none, it stays recorded
 * and says why (RevertHeld). A revert held by the channel's trust waits for it, and says so. A
 * release the channel recalled may still be reverted, by a person or by the threshold: a recall
 * stops turns for it, not the way back from it.
 */
export function heldRevert(
  i: RevertInput,
  view: Extract<TargetView, { kind: "held" }>,
  base: RevertOutcome,
): RevertOutcome {
  const r = view.revert;
  if (r === undefined) {
    if (REVERTIBLE.has(view.hold.rule)) return wantRevert(i, view.from, base);
    return {
      ...base,
      condition: unliftedRequest(i, view) ?? endedCondition(i, i.cluster.status?.revert),
    };
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
 * A request (GitOps writes the field too; the CLI refuses it) to revert a release held by a rule
 * a revert does not lift: said on the Cluster, with what the hold names, never dropped silently.
 */
function unliftedRequest(
  i: RevertInput,
  view: Extract<TargetView, { kind: "held" }>,
): RevertOutcome["condition"] {
  const req = i.cluster.spec.rollout?.revertRequest;
  if (req === undefined || !sameRelease(req, view.from)) return undefined;
  const hold = view.hold.message.replaceAll("CLUSTER", i.cluster.metadata.name);
  const msg =
    `spec.rollout.revertRequest names ${req.version}, held by ${view.hold.rule}, and a revert does not lift that hold: ` +
    `nothing is reverted. ${hold}`;
  return cond("False", "RevertHeld", msg);
}

/**
 * The holds whose message names `liken rollout revert` as the way out, with the held release as
 * the one to leave: a revert of it is decided as for a release in force (a person's request, or
 * the threshold). Every hold's named action must work (issue 48: NotVouched named it, and the
 * request was dropped with nothing said).
 */
export const REVERTIBLE: ReadonlySet<string> = new Set(["Recalled", "NotVouched"]);

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
// Whether to revert now.

export function wantRevert(i: RevertInput, from: ReleaseRef, base: RevertOutcome): RevertOutcome {
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
export function floorHold(
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
export function withRevoked(
  list: readonly RevokedRelease[] | undefined,
  r: RevokedRelease,
): RevokedRelease[] {
  const rest = (list ?? []).filter((x) => !sameRelease(x, r));
  return [...rest, r].slice(-REVOKED_RELEASES_MAX_ITEMS);
}
