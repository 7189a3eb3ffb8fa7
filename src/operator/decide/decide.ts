// The turn decision, pure: from what the operator observed (the Cluster, its Machines, the
// heartbeats, the time, its own start) to what it should do (grant, release, mark stalled,
// mark Lost or alive) and the Cluster status that records it. All I/O (watches, the
// resourceVersion-guarded writes, Events) lives in operator.ts; every rule of the page about
// turns lives here and in machine-view.ts, and test/unit/operator-decide.test.ts checks it
// table by table.
//
// The rules (the page, sections 3 and 4):
//   - a turn goes to a machine that staged the target and asks (Auto, or Manual approved
//     for exactly that release), oldest request first;
//   - only while turns held + machines Lost or otherwise down < the budget;
//   - never to a leader while another leader is down, whatever the budget says;
//   - a turn not started yet is taken back (Overtaken) when a machine that went down since
//     its grant makes the budget or the leader rule refuse it now (overtaken.ts);
//   - never in the first START_GRACE_SECONDS after this copy started (or woke from a pause);
//   - never while a turn is stalled, until a person releases it (`liken rollout resume`);
//   - a record leaves the list when its machine is back on the release and Ready (for
//     spec.rollout.soakSeconds), rolled back and reported it, gave the turn back unused, was
//     deleted, or was released; "gave back" and "deleted" only on a Machine view at least as
//     new as the Cluster (freshness.ts);
//   - Lost on the operator's monotonic clock; a live agent that writes its step over a Lost
//     mark is yielded to (HeartbeatUnseen), not marked again (markLost).
// And the brakes on top of the page (each in its own module, each with its table):
//   - none once spec.rollout.maxFailedTrials machines failed their trial of the target
//     (brake.ts), until spec.version changes or a person resumes;
//   - until one machine proved the target, at most (maxFailedTrials - failed) of its trials
//     at a time, whatever the budget says (brake.ts, firstTrialCap);
//   - none outside every window of spec.disruption.windows (windows.ts);
//   - the first turns of a release only to its canaries, then none until they passed
//     (canary.ts).
import { peerSourcesOf } from "../peers/sources-status.js";
import {
  type Cluster,
  type ClusterStatus,
  type RebootTurn,
  type TakenBackTurn,
} from "../../api/index.js";
import { staleChannelView } from "../channel/stale-view.js";
import { revertOf, withoutUnrevoked, type RevertOutcome } from "../revert/revert.js";
import { setCondition } from "../view/conditions.js";
import { brakeOf } from "../turns/brake.js";
import { parseBudget } from "../turns/budget.js";
import { overtake, type Overtaken } from "../turns/overtaken.js";
import { pauseDrains } from "../turns/paused.js";
import { settleTakenBack, takenBackEntry } from "../turns/taken-back.js";
import { canaryOf, withCanaryGrants } from "../turns/canary.js";
import { progressingCondition } from "../turns/progress.js";
import { summarize } from "../status/summary.js";
import { rfc3339 } from "../../api/time.js";
import { boundStatus, CLUSTER_STATUS_BOUNDS, joinBounded, maxLengthOf } from "../../api/bounds.js";
import { specValidCondition } from "../turns/windows.js";
import { isLost, targetOf } from "../view/machine-view.js";

import type { ChannelView } from "../channel/view.js";
import {
  type Ctx,
  type DecideSettings,
  type Decision,
  type Observed,
  type TurnRelease,
  machinesFresh,
} from "./decision.js";
import { settleTurns } from "./settle.js";
import { drainSkippedOf, grantTurns } from "./grant.js";
import { markLost } from "./lost.js";
import {
  displayOf,
  findProgressing,
  heldNotice,
  sameJson,
  upsert,
  withAvailableText,
  withChannelConditions,
  withChannelStatus,
  withEvidence,
  withSpecValid,
} from "./status.js";

export {
  ALIVE_REASONS,
  DEFAULT_SETTINGS,
  DEFAULT_TURN_DEADLINE_SECONDS,
  RELEASE_REASONS,
  deadlineOf,
} from "./decision.js";
export type {
  AliveReason,
  DecideSettings,
  Decision,
  HeldNotice,
  LostMark,
  Observed,
  ReleaseReason,
  TurnRelease,
  TurnStall,
  ChannelView,
} from "./decision.js";
export { drainSkippedOf } from "./grant.js";
export { REPROBE_SECONDS } from "./lost.js";

/** `o` without its channel read when that read is older than the recorded one. */
function withoutStaleView(o: Observed): Observed {
  if (!staleChannelView(o.cluster, o.channel?.trust?.status)) return o;
  const { channel: _stale, ...rest } = o;
  return rest;
}

export function decide(observed: Observed, s: DecideSettings): Decision {
  // A person's unrevoke (spec.rollout.unrevoke) applies before anything reads the target. A
  // channel read older than the recorded one is not written over it (stale-view.ts).
  const fresh = withoutStaleView(observed);
  const cleaned: Observed = { ...fresh, cluster: withoutUnrevoked(observed.cluster) };
  // Lost reads only the machines, the heartbeats and the clock, which a revert leaves alone:
  // one set for the revert's part and the turns' (a pass over the fleet less).
  const lost = lostOf(cleaned, s);
  const rv = revertFirst(cleaned, s, lost);
  // A revert that begins now changes the target of this very decision: no grant for the
  // release it leaves goes out in the write that starts it.
  const o: Observed = withRevert(cleaned, rv);
  const byName = new Map(o.machines.map((m) => [m.metadata.name, m] as const));
  // The target under the trust this very decision records (a recall or a refusal takes effect
  // with the write that reports it, not one tick later).
  const target = targetOf(withTrust(o.cluster, o.channel?.trust?.status, o.channel), o.now);
  const brake = brakeOf(o.cluster, o.machines, target);
  const ctx: Ctx = { o, s, byName, lost, target, brake };
  const before = o.cluster.status ?? {};

  const settled = settleTurns(ctx, before.rebootTurns ?? []);
  const { stalls } = settled;
  const budget = parseBudget(o.cluster.spec.disruption?.maxUnavailable, o.machines.length);
  const took = takeBack(ctx, settled.kept, budget.budget);
  const { overtaken, takenBack, deferred } = took;
  // A started turn that may not be past its drain waits while the budget is full (paused.ts).
  const pause = pauseDrains({
    turns: took.kept,
    takenBack,
    byName,
    lost,
    budget: budget.budget,
    now: rfc3339(o.now),
  });
  const kept = pause.turns;
  const releases = [
    ...settled.releases,
    ...overtaken.map((x): TurnRelease => ({ ...x, reason: "Overtaken" })),
  ];
  const canary = canaryOf(o.cluster, o.machines, kept, target, o.now);
  const { grants, blocked } = grantTurns(ctx, kept, takenBack, budget.budget, canary.gate);
  const turns = [...kept, ...grants];
  // A machine granted a new turn is counted by it: its taken-back record has done its job.
  const regranted = new Set(grants.map((g) => g.machine));
  const takenBackNow = takenBack.filter((t) => !regranted.has(t.machine));
  const lostMarks = markLost(ctx);

  const summary = summarize(o.cluster, o.machines, turns, lost, s.endpoint);
  const progressing = progressingCondition({
    cluster: o.cluster,
    machines: o.machines,
    turns,
    phase: summary.phase,
    blocked,
    budget,
    now: o.now,
    startedAt: o.startedAt,
    graceSeconds: s.startGraceSeconds,
    target: ctx.target,
    lost,
    brake,
  });
  let conditions = before.conditions ?? [];
  if (progressing !== undefined) conditions = upsert(conditions, progressing);
  conditions = withChannelConditions(conditions, o.channel);
  conditions = withSpecValid(conditions, specValidCondition(o.cluster, o.now));
  if (rv.condition !== undefined)
    conditions = setCondition(conditions, rv.condition, rfc3339(o.now));

  const made: ClusterStatus = {
    ...before,
    ...summary,
    rebootTurns: turns,
    takenBackTurns: takenBackNow.length > 0 ? takenBackNow : undefined,
    turns: joinBounded(
      turns.map((t) => t.machine),
      ",",
      maxLengthOf(CLUSTER_STATUS_BOUNDS, "turns"),
    ),
    display: displayOf(
      summary.phase,
      progressing ?? findProgressing(conditions),
      conditions.find((c) => c.type === "SpecValid"),
    ),
    conditions,
    canary: withCanaryGrants(canary.status, canary.gate, grants),
    drainSkipped: drainSkippedOf(o.machines, target),
    peerSources: peerSourcesOf(o.cluster, o.machines, target, lost, o.nodeAddresses),
    lastKnownGood: rv.lastKnownGood,
    priorKnownGood: rv.priorKnownGood,
    revokedReleases: rv.revokedReleases,
    revert: rv.revert,
  };
  if (o.cluster.metadata.generation !== undefined) {
    made.observedGeneration = o.cluster.metadata.generation;
  }
  if (o.channel !== undefined) withChannelStatus(made, o.channel);
  withAvailableText(made, o.machines);
  withEvidence(made, { machines: o.machines, lost, nodes: o.nodeBoots, target, now: o.now });
  // Compared and written within the CRD's bounds: a field over its bound would be refused
  // whole by the API server (422), and compared unbounded it would look changed every tick.
  const { status, cut } = boundStatus(CLUSTER_STATUS_BOUNDS, made);
  return {
    status,
    // Against the status as recorded: what this decision read through (an unrevoke, a revert
    // it starts) is a change to write.
    changed: !sameJson(status, observed.cluster.status ?? {}),
    grants,
    releases,
    paused: pause.paused,
    stalls,
    lostMarks,
    needsFreshMachines: settled.deferred || deferred,
    budget,
    blocked,
    held: heldNotice(before.conditions, progressing),
    cut,
    revertStarted: rv.started,
    revertRetargeted: rv.retargeted,
    floorWanted: rv.floorWanted,
    queryWanted: rv.queryWanted,
  };
}

/**
 * The turns taken back: those taken back earlier, until their machines say they did not act on
 * them (taken-back.ts), and those not acted on yet that a machine down since their grant now
 * refuses (overtaken.ts), recorded as taken back in the same write.
 */
function takeBack(
  ctx: Ctx,
  turns: readonly RebootTurn[],
  budget: number,
): {
  kept: RebootTurn[];
  overtaken: Overtaken[];
  takenBack: TakenBackTurn[];
  deferred: boolean;
} {
  const { o, byName, lost } = ctx;
  const fresh = machinesFresh(ctx);
  const back = settleTakenBack({ recorded: o.cluster.status?.takenBackTurns ?? [], byName, fresh });
  const took = overtake({ turns, takenBack: back.kept, byName, lost, budget, fresh });
  const now = rfc3339(o.now);
  return {
    kept: took.kept,
    overtaken: took.overtaken,
    takenBack: [...back.kept, ...took.overtaken.map((x) => takenBackEntry(x.turn, now))],
    deferred: back.deferred || took.deferred,
  };
}

/** status.evidence and the EVIDENCE column, from the status this decision makes (evidence.ts). */
/**
 * The revert's part (revert.ts), decided on the Cluster as recorded: known good releases, a
 * revert that begins, the Reverted condition. Turns and the brake as recorded: a release is
 * known good only once nothing of its rollout is in flight.
 */
function revertFirst(o: Observed, s: DecideSettings, lost: ReadonlySet<string>): RevertOutcome {
  const target = targetOf(o.cluster);
  return revertOf({
    cluster: o.cluster,
    machines: o.machines,
    turns: o.cluster.status?.rebootTurns ?? [],
    brakeHeld: brakeOf(o.cluster, o.machines, target).held,
    lost,
    now: o.now,
    identity: s.identity,
    floors: o.floors ?? new Map(),
    ...(o.queryChecks === undefined ? {} : { queryChecks: o.queryChecks }),
  });
}

/** The machines Lost on the operator's monotonic clock (machine-view.ts, isLost). */
function lostOf(o: Observed, s: DecideSettings): Set<string> {
  const lost = new Set<string>();
  for (const m of o.machines) {
    if (isLost(m, o.heartbeats, o.mono, s.lostAfterSeconds)) lost.add(m.metadata.name);
  }
  return lost;
}

/** The Cluster as this decision sees it once the revert it starts is recorded. */
/** `o` with the revert this decision starts or retargets (unchanged when it does neither). */
function withRevert(o: Observed, rv: RevertOutcome): Observed {
  if (rv.started === undefined && rv.retargeted === undefined) return o;
  const status = { ...o.cluster.status, revert: rv.revert, revokedReleases: rv.revokedReleases };
  return { ...o, cluster: { ...o.cluster, status } };
}

/** The AVAILABLE column: the channel's newest, marked when it failed here or was revoked. */
/** The Cluster with the channel's verdict this decision records (status and conditions). */
function withTrust(c: Cluster, trust: ClusterStatus["trust"], channel?: ChannelView): Cluster {
  if (trust === undefined || channel === undefined) return c;
  const conditions = withChannelConditions(c.status?.conditions ?? [], channel);
  return { ...c, status: { ...c.status, trust, conditions } };
}

/** The Progressing reasons that get an Event when they begin. */
/** The STATUS column: the phase, or the reason a held rollout does not move. */
/** SpecValid is there while windows are configured; it leaves with them. */
/**
 * Whether two statuses serialize alike: key order and keys holding undefined do not count (as
 * in JSON). Compared in place: serializing both on every decision was most of its cost.
 */
