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
import { peerSourcesOf } from "./peer-sources-status.js";
import type { NodeAddress } from "./peer-address.js";
import {
  LOST_AFTER_SECONDS,
  START_GRACE_SECONDS,
  type AgentStep,
  type Cluster,
  type ClusterCondition,
  type ClusterStatus,
  type DrainSkipped,
  type Machine,
  type MachineCondition,
  type RebootTurn,
  type ReleaseRef,
  type RevertRecord,
  type TakenBackTurn,
} from "../api/index.js";
import { staleChannelView } from "./stale-view.js";
import {
  revertOf,
  withoutUnrevoked,
  type FloorRead,
  type Retarget,
  type RevertOutcome,
} from "./revert.js";
import type { QueryCheckView } from "./prom-check.js";
import { setCondition } from "./conditions.js";
import { brakeOf, firstTrialCap, type BrakeView } from "./brake.js";
import { parseBudget, type BudgetParse } from "./budget.js";
import { overtake, type Overtaken } from "./overtaken.js";
import { downOf, type Down } from "./down.js";
import { settleTakenBack, takenBackEntry } from "./taken-back.js";
import { canaryOf, withCanaryGrants, type CanaryGate } from "./canary.js";
import { progressingCondition, stallDetail, type GrantBlock } from "./progress.js";
import { seenUpTo } from "./freshness.js";
import { summarize } from "./summary.js";
import { rfc3339 } from "../api/time.js";
import { boundStatus, CLUSTER_STATUS_BOUNDS, joinBounded, maxLengthOf } from "../api/bounds.js";
import { specValidCondition, windowState } from "./windows.js";
import { availableText } from "./available.js";
import { evidenceOf, evidenceText, type EvidenceInput } from "./evidence.js";
import {
  isLeader,
  isLost,
  stepAfterLost,
  targetOf,
  turnAsk,
  type HeartbeatView,
} from "./machine-view.js";

/**
 * How long a machine may hold a turn before the rollout stalls: a drain that waits on
 * PodDisruptionBudgets, a firmware POST of several minutes on big servers, the trial boot
 * and rejoin. 30 minutes is generous for all three; a person sets it per fleet.
 */
export const DEFAULT_TURN_DEADLINE_SECONDS = 30 * 60;

export interface DecideSettings {
  /** This copy's identity, written into grantedBy. */
  identity: string;
  startGraceSeconds: number;
  lostAfterSeconds: number;
  turnDeadlineSeconds: number;
  /** The ENDPOINT column, when known. */
  endpoint?: string;
}

export const DEFAULT_SETTINGS: Omit<DecideSettings, "identity"> = {
  startGraceSeconds: START_GRACE_SECONDS,
  lostAfterSeconds: LOST_AFTER_SECONDS,
  turnDeadlineSeconds: DEFAULT_TURN_DEADLINE_SECONDS,
};

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

export interface Observed {
  cluster: Cluster;
  /** The Machines whose spec.cluster names this Cluster. */
  machines: readonly Machine[];
  /**
   * The resourceVersion the Machine view is at (its list, or its watch's last event or
   * bookmark). Releases on what the Machines no longer say (GivenBack, MachineDeleted) wait
   * for a view at least as new as the Cluster (freshness.ts).
   */
  machinesVersion: string | undefined;
  /** The addresses of the Nodes that serve peers (peer-address.ts): where a holder is reached. */
  nodeAddresses?: ReadonlyMap<string, readonly NodeAddress[]>;
  heartbeats: HeartbeatView;
  /** The wall clock: what the records say (grantedAt, deadlines) and the messages. */
  now: Date;
  /**
   * The operator's monotonic clock (ms, performance.now()), which the heartbeats are on:
   * Lost is judged on it, so a wall clock stepped back does not hide a dead machine.
   */
  mono: number;
  /** When this copy started granting-wise: its start, or its wake-up after a pause. */
  startedAt: Date;
  channel?: ChannelView;
  /** The revert floors read so far (release.yaml revertFloor), by release digest (revert.ts). */
  floors?: ReadonlyMap<string, FloorRead>;
  /** spec.rollout.revert.prometheus's checks so far, by release digest (prom-check.ts). */
  queryChecks?: ReadonlyMap<string, QueryCheckView>;
}

export const RELEASE_REASONS = [
  /** Back on the turn's release and Ready. */
  "Returned",
  /** Its trial of the turn's release failed or was skipped, it runs the old one and said so. */
  "RolledBack",
  /** It no longer asks for this turn (retargeted, or gave up before acting). */
  "GivenBack",
  /** Its Machine was deleted. */
  "MachineDeleted",
  /** A person released the stalled turn (`liken rollout resume`). */
  "Resumed",
  /** Its drain timed out and it gave the turn back (spec.disruption.onDrainTimeout Skip). */
  "DrainTimedOut",
  /** Not started, and the budget or the leader rule no longer allows it (overtaken.ts). */
  "Overtaken",
] as const;
export type ReleaseReason = (typeof RELEASE_REASONS)[number];

export interface TurnRelease {
  turn: RebootTurn;
  reason: ReleaseReason;
  message: string;
}

export interface TurnStall {
  turn: RebootTurn;
  message: string;
}

/**
 * Why the operator writes a Machine's Alive condition (the reason it carries):
 * - NoHeartbeat: silent for the Lost threshold; step Lost;
 * - HeartbeatUnseen: marked Lost, and the agent wrote its own step over the mark: it lives
 *   but its heartbeat does not reach this copy. The operator yields: it stops writing Lost
 *   (each mark met a write back, with no end) and leaves the agent's step; the machine still
 *   counts as Lost (budget, no turn) until a renewal is seen;
 * - HeartbeatReturned: a renewal seen again; the step the machine shows again, if it read Lost.
 */
export const ALIVE_REASONS = ["NoHeartbeat", "HeartbeatUnseen", "HeartbeatReturned"] as const;
export type AliveReason = (typeof ALIVE_REASONS)[number];

/** A write to a Machine's status the operator owns: the Alive condition, and step Lost or back. */
export interface LostMark {
  machine: string;
  /** The resourceVersion the mark was decided from (the write is conditioned on it). */
  resourceVersion: string | undefined;
  lost: boolean;
  reason: AliveReason;
  /** The step it shows: Lost, or the step it shows again; absent: the agent's, untouched. */
  step?: "Lost" | AgentStep;
  message: string;
}

export interface Decision {
  /** The Cluster status to write (rebootTurns, summary, conditions). */
  status: ClusterStatus;
  /** Whether `status` differs from the recorded one (write only then). */
  changed: boolean;
  grants: RebootTurn[];
  releases: TurnRelease[];
  stalls: TurnStall[];
  lostMarks: LostMark[];
  /**
   * A record would be released as GivenBack or MachineDeleted, but the Machine view is older
   * than the Cluster: it was kept, and the caller reads the Machines again and decides anew.
   */
  needsFreshMachines: boolean;
  budget: BudgetParse;
  /** Why no (more) turn was granted, for the condition and the logs. */
  blocked: GrantBlock | undefined;
  /** A brake that began to hold with this decision, for an Event (once, not every tick). */
  held: HeldNotice | undefined;
  /** Status fields cut to their CRD bound by the last guard (bounds.ts): a maker's miss. */
  cut: string[];
  /** The revert that begins with this decision (revert.ts), for its Event and metric. */
  revertStarted: RevertRecord | undefined;
  /** A revert in force sent to another target with this decision: its own Event, no count. */
  revertRetargeted?: Retarget | undefined;
  /** A release whose revert floor must be read before its revert can be decided. */
  floorWanted: ReleaseRef | undefined;
  /** The Prometheus check to run for the target (when its interval passed). */
  queryWanted: RevertOutcome["queryWanted"];
}

export interface HeldNotice {
  reason: HeldReason;
  message: string;
}

// ---------------------------------------------------------------------------------------

interface Ctx {
  o: Observed;
  s: DecideSettings;
  byName: ReadonlyMap<string, Machine>;
  lost: ReadonlySet<string>;
  target: ReleaseRef | undefined;
  brake: BrakeView;
}

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
  const { kept, overtaken, takenBack, deferred } = takeBack(ctx, settled.kept, budget.budget);
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
  withEvidence(made, { machines: o.machines, lost, target, now: o.now });
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
function withEvidence(
  made: ClusterStatus,
  i: Pick<EvidenceInput, "machines" | "lost" | "target" | "now">,
): void {
  const evidence = evidenceOf({
    ...i,
    before: made.evidence,
    revoked: made.revokedReleases ?? [],
    recalls: made.trust?.recalls ?? [],
  });
  if (evidence.length === 0) return;
  made.evidence = evidence;
  const text = evidenceText(evidence);
  if (text !== undefined) made.evidenceText = text;
}

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

function withChannelConditions(
  list: ClusterCondition[],
  channel: ChannelView | undefined,
): ClusterCondition[] {
  if (channel === undefined) return list;
  const reached = upsert(list, channel.condition);
  return channel.trust === undefined ? reached : upsert(reached, channel.trust.condition);
}

function withChannelStatus(made: ClusterStatus, channel: ChannelView): void {
  made.channel = channel.channel;
  if (channel.available !== undefined) made.available = channel.available;
  if (channel.trust !== undefined) made.trust = channel.trust.status;
}

/** The AVAILABLE column: the channel's newest, marked when it failed here or was revoked. */
function withAvailableText(made: ClusterStatus, machines: readonly Machine[]): void {
  const shown = availableText(made.available, machines, made.revokedReleases);
  if (shown === undefined) delete made.availableText;
  else made.availableText = shown;
}

/** The Cluster with the channel's verdict this decision records (status and conditions). */
function withTrust(c: Cluster, trust: ClusterStatus["trust"], channel?: ChannelView): Cluster {
  if (trust === undefined || channel === undefined) return c;
  const conditions = withChannelConditions(c.status?.conditions ?? [], channel);
  return { ...c, status: { ...c.status, trust, conditions } };
}

/** The Progressing reasons that get an Event when they begin. */
const NOTICED = [
  "ReleaseFailed",
  "OutsideMaintenanceWindow",
  "CanaryPaused",
  "AwaitingFirstTrial",
  "RolloutPaused",
  "ReleaseRevoked",
] as const;
type HeldReason = (typeof NOTICED)[number];
const isNoticed = (r: string): r is HeldReason => (NOTICED as readonly string[]).includes(r);

function heldNotice(
  before: readonly ClusterCondition[] | undefined,
  now: ClusterCondition | undefined,
): HeldNotice | undefined {
  if (now?.type !== "Progressing" || !isNoticed(now.reason)) return undefined;
  const old = before?.find((c) => c.type === "Progressing");
  return old?.reason === now.reason ? undefined : { reason: now.reason, message: now.message };
}

/** The STATUS column: the phase, or the reason a held rollout does not move. */
const HELD_REASONS: ReadonlySet<string> = new Set([
  "RolloutStalled",
  "RolloutPaused",
  "ReleaseRevoked",
  "ReleaseFailed",
  "OutsideMaintenanceWindow",
  "CanaryPaused",
]);

function displayOf(
  phase: string,
  p: ClusterCondition | undefined,
  specValid: ClusterCondition | undefined,
): string {
  // A spec the API admitted but this operator cannot use (a time zone its database does not
  // know: the API cannot check, docs/adr/time-zone-validation.md) comes first: it is what a
  // person must fix, and `kubectl get clusters` is where they look.
  if (specValid?.status === "False") return "SpecInvalid";
  return p !== undefined && HELD_REASONS.has(p.reason) ? p.reason : phase;
}

function findProgressing(list: readonly ClusterCondition[]): ClusterCondition | undefined {
  return list.find((c) => c.type === "Progressing");
}

/** SpecValid is there while windows are configured; it leaves with them. */
function withSpecValid(
  list: ClusterCondition[],
  c: ClusterCondition | undefined,
): ClusterCondition[] {
  if (c !== undefined) return upsert(list, c);
  return list.filter((x) => x.type !== "SpecValid");
}

function upsert(list: ClusterCondition[], c: ClusterCondition): ClusterCondition[] {
  return list.some((x) => x.type === c.type)
    ? list.map((x) => (x.type === c.type ? c : x))
    : [...list, c];
}

/**
 * Whether two statuses serialize alike: key order and keys holding undefined do not count (as
 * in JSON). Compared in place: serializing both on every decision was most of its cost.
 */
function sameJson(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a) || Array.isArray(b)) {
    if (!Array.isArray(a) || !Array.isArray(b) || a.length !== b.length) return false;
    return a.every((x, i) => sameJson(x ?? null, b[i] ?? null));
  }
  if (a === null || b === null || typeof a !== "object" || typeof b !== "object") return false;
  const x = a as Record<string, unknown>;
  const y = b as Record<string, unknown>;
  const keys = Object.keys(x).filter((k) => x[k] !== undefined);
  const count = Object.keys(y).filter((k) => y[k] !== undefined).length;
  return keys.length === count && keys.every((k) => y[k] !== undefined && sameJson(x[k], y[k]));
}

// ---------------------------------------------------------------------------------------
// Existing turns: release, stall, or keep.

function settleTurns(
  ctx: Ctx,
  recorded: readonly RebootTurn[],
): { kept: RebootTurn[]; releases: TurnRelease[]; stalls: TurnStall[]; deferred: boolean } {
  const kept: RebootTurn[] = [];
  const releases: TurnRelease[] = [];
  const stalls: TurnStall[] = [];
  let deferred = false;
  for (const recordedTurn of recorded) {
    let turn = recordedTurn;
    const release = releaseOf(ctx, turn);
    if (release !== undefined && onAbsence(release) && !machinesFresh(ctx)) {
      deferred = true; // kept as it is until a Machine view as new as this Cluster says so
      kept.push(turn);
      continue;
    }
    if (release !== undefined) {
      releases.push(release);
      continue;
    }
    const soaking = soakOf(ctx, turn);
    if (soaking !== undefined) {
      if (soaking === "done") {
        releases.push({
          turn,
          reason: "Returned",
          message: `back on ${turn.version} and Ready for ${ctx.o.cluster.spec.rollout?.soakSeconds ?? 0} s (soak)`,
        });
        continue;
      }
      if (soaking.returnedAt !== undefined) {
        kept.push(soaking); // soaking: back and Ready, it cannot stall
        continue;
      }
      turn = soaking;
    }
    const deadline = turn.deadline ?? deadlineOf(turn.grantedAt, ctx.s.turnDeadlineSeconds);
    if (turn.stalledAt === undefined && ctx.o.now.getTime() > Date.parse(deadline)) {
      const stalled = { ...turn, deadline, stalledAt: rfc3339(ctx.o.now) };
      kept.push(stalled);
      const m = ctx.byName.get(turn.machine);
      stalls.push({ turn: stalled, message: stallDetail(stalled, m, ctx.lost.has(turn.machine)) });
      continue;
    }
    kept.push(turn);
  }
  return { kept, releases, stalls, deferred };
}

/** Releases decided on what a Machine no longer says: a stale view says it wrongly. */
function onAbsence(r: TurnRelease): boolean {
  return r.reason === "GivenBack" || r.reason === "MachineDeleted";
}

function machinesFresh(ctx: Ctx): boolean {
  return seenUpTo(ctx.o.machinesVersion, ctx.o.cluster.metadata.resourceVersion);
}

export function deadlineOf(grantedAt: string, seconds: number): string {
  return rfc3339(new Date(Date.parse(grantedAt) + seconds * 1000));
}

function releaseOf(ctx: Ctx, turn: RebootTurn): TurnRelease | undefined {
  const m = ctx.byName.get(turn.machine);
  if (m === undefined) {
    return {
      turn,
      reason: "MachineDeleted",
      message: `Machine ${turn.machine} was deleted while it held a turn`,
    };
  }
  const resume = m.spec.resume;
  if (resume !== undefined && resume.turnGrantedAt === turn.grantedAt) {
    return {
      turn,
      reason: "Resumed",
      message: `released by ${resume.by} at ${resume.at}: ${resume.reason}`,
    };
  }
  // A silent machine says nothing about its turn: it keeps it (and may stall).
  if (ctx.lost.has(turn.machine)) return undefined;
  const skipped = drainTimedOut(m, turn);
  if (skipped !== undefined) return { turn, ...skipped };
  // Back and Ready under a soak: soakOf decides when the turn ends.
  const soak = ctx.o.cluster.spec.rollout?.soakSeconds ?? 0;
  if (soak > 0 && isBack(m, turn)) return undefined;
  const found = returned(m, turn) ?? rolledBack(m, turn) ?? givenBack(m, turn);
  return found === undefined ? undefined : { turn, ...found };
}

type Found = { reason: ReleaseReason; message: string } | undefined;

/** The machine's drain for this turn timed out and it uncordoned: the turn is given back. */
function drainTimedOut(m: Machine, turn: RebootTurn): Found {
  const t = m.status?.drainTimedOut;
  if (t === undefined || t.turnGrantedAt !== turn.grantedAt) return undefined;
  const pdb = t.podDisruptionBudget ? ` (PodDisruptionBudget ${t.podDisruptionBudget})` : "";
  const pod = t.pod ? `, held by pod ${t.pod}${pdb}` : "";
  return {
    reason: "DrainTimedOut",
    message: `its drain timed out at ${t.at}${pod}; it uncordoned and goes to the back of the queue: ${t.message}`,
  };
}

function isBack(m: Machine | undefined, turn: RebootTurn): boolean {
  const s = m?.status;
  return s?.version === turn.version && s.step === "Ready";
}

function returned(m: Machine, turn: RebootTurn): Found {
  if (!isBack(m, turn)) return undefined;
  return { reason: "Returned", message: `back on ${turn.version} and Ready` };
}

/**
 * Soak (spec.rollout.soakSeconds > 0): a machine back and Ready keeps its turn, and so its
 * slot of the budget, until it stayed Ready that long as this operator saw it (returnedAt,
 * on the operator's clock). Leaving Ready restarts the soak. Undefined: not soaking (the turn
 * goes on through the other rules); "done": release it; otherwise the turn to keep.
 */
function soakOf(ctx: Ctx, turn: RebootTurn): RebootTurn | "done" | undefined {
  const soak = ctx.o.cluster.spec.rollout?.soakSeconds ?? 0;
  if (soak <= 0) return undefined;
  const m = ctx.byName.get(turn.machine);
  if (!isBack(m, turn) || ctx.lost.has(turn.machine)) {
    if (turn.returnedAt === undefined) return undefined;
    const { returnedAt: _left, ...rest } = turn;
    return rest; // it left Ready: the soak starts again when it is back
  }
  if (turn.returnedAt === undefined) return { ...turn, returnedAt: rfc3339(ctx.o.now) };
  const done = Date.parse(turn.returnedAt) + soak * 1000 <= ctx.o.now.getTime();
  return done ? "done" : turn;
}

/**
 * A trial of the turn's release is this turn's unless the turn's record names it as the one
 * the machine showed at the grant (priorTrialAt). The operator compares its own record, never
 * trial.at against grantedAt: the agent stamps its trial on its own clock, and one running
 * hours ahead would make an earlier failed trial look newer than a fresh turn and release it
 * as RolledBack before the machine even drained.
 */
function rolledBack(m: Machine, turn: RebootTurn): Found {
  const s = m.status ?? {};
  const trial = s.lastTrial;
  if (trial === undefined || trial.version !== turn.version || trial.result === "Succeeded") {
    return undefined;
  }
  // Only a trial of THIS turn (not one from an earlier attempt), and only once it is over.
  if (!trialOfThisTurn(trial.at, turn) || s.step === "Updating") return undefined;
  const what =
    trial.result === "Failed"
      ? "failed"
      : trial.result === "Inconclusive"
        ? "could not be judged"
        : "was skipped";
  return {
    reason: "RolledBack",
    message: `its trial of ${turn.version} ${what} (${trial.reason}); it runs ${s.version ?? "its previous release"}`,
  };
}

/**
 * The agent gives a turn back unused by withdrawing its request (status.turnRequest gone
 * or naming another release) before it starts (step Updating / an updateStage). Once it
 * started, only its return or its reported rollback ends the turn.
 */
function givenBack(m: Machine, turn: RebootTurn): Found {
  const s = m.status ?? {};
  const req = s.turnRequest;
  const asks =
    req !== undefined &&
    req.version === turn.version &&
    (turn.digest === undefined || req.digest === turn.digest);
  if (asks || s.step === "Updating" || s.updateStage !== undefined) return undefined;
  return {
    reason: "GivenBack",
    message: `it no longer asks for a turn for ${turn.version} (step ${s.step ?? "none"})`,
  };
}

// ---------------------------------------------------------------------------------------
// New turns.

function grantTurns(
  ctx: Ctx,
  kept: readonly RebootTurn[],
  takenBack: readonly TakenBackTurn[],
  budget: number,
  canary: CanaryGate,
): { grants: RebootTurn[]; blocked: GrantBlock | undefined } {
  const { o, target } = ctx;
  const holding = new Set(kept.map((t) => t.machine));
  const eligible = o.machines.filter(
    (m) =>
      !ctx.lost.has(m.metadata.name) &&
      !holding.has(m.metadata.name) &&
      turnAsk(m, target).kind === "eligible",
  );
  if (eligible.length === 0) return { grants: [], blocked: undefined };
  if (target === undefined) return { grants: [], blocked: { kind: "no-target" } };
  const hold = holdOf(ctx, kept, canary);
  if (hold !== undefined) return { grants: [], blocked: hold };

  const down = downOf(kept, takenBack, o.machines, ctx.lost);
  // The budget already full (most passes of a rollout at scale): the loop below would stop at
  // the first candidate it looks at, whichever that is; no need to order thousands of them.
  // Unless a candidate is down already (a turn taken back, not acknowledged): a new turn for
  // it adds nobody, and the loop judges it against the others.
  if (down.size >= budget && !eligible.some((m) => down.has(m.metadata.name))) {
    return fullBudget(eligible, canary, down.size, budget);
  }
  return grantInOrder(ctx, kept, eligible, down, budget, canary, target);
}

/** grantTurns' loop: the eligible machines, oldest request first, while the rules allow. */
function grantInOrder(
  ctx: Ctx,
  kept: readonly RebootTurn[],
  eligible: readonly Machine[],
  down: Map<string, Down>,
  budget: number,
  canary: CanaryGate,
  target: ReleaseRef,
): { grants: RebootTurn[]; blocked: GrantBlock | undefined } {
  const { o, s } = ctx;
  const candidates = eligible.map((m) => ({ m, asked: requestTime(m, target) })).sort(byRequest);
  const cap = firstTrialCap(ctx.brake, o.machines, kept, target);
  const grants: RebootTurn[] = [];
  let blocked: GrantBlock | undefined;
  // The first leader down, in the order `down` holds them (kept turns, then the machines
  // down, then this pass's grants): the one the leader rule names.
  let leaderDown = [...down.values()].find((d) => d.leader);
  for (const { m } of candidates) {
    if (canary.kind === "only") {
      if (grants.length >= canary.left) break;
      if (!canary.pool.has(m.metadata.name)) continue; // the canaries go first
    }
    const refused = refusalOf(m, down, leaderDown, budget);
    if (refused?.stop === true) {
      blocked = refused.block;
      break;
    }
    if (refused !== undefined) {
      blocked ??= refused.block;
      continue;
    }
    if (cap !== undefined && grants.length >= cap.left) {
      // The budget has room, but a release no machine proved yet goes to few at a time.
      const trying = [...cap.trying, ...grants.map((g) => g.machine)];
      blocked = { kind: "first-trial", cap: { ...cap, left: 0, trying } };
      break;
    }
    const turn: RebootTurn = {
      machine: m.metadata.name,
      grantedAt: rfc3339(o.now),
      grantedBy: s.identity,
      leader: isLeader(m),
      version: target.version,
      digest: target.digest,
      deadline: deadlineOf(rfc3339(o.now), s.turnDeadlineSeconds),
      ...priorTrialOf(m, target),
    };
    grants.push(turn);
    const d = { machine: turn.machine, leader: turn.leader };
    down.set(turn.machine, d);
    leaderDown ??= turn.leader ? d : undefined;
  }
  return { grants, blocked };
}

/**
 * Why the budget or the leader rule refuses `m` now; `stop`: no later candidate can go either.
 * A candidate down already (its turn taken back, not acknowledged) is judged against the
 * others: its new turn replaces the record that counts it, and adds nobody.
 */
function refusalOf(
  m: Machine,
  down: ReadonlyMap<string, Down>,
  leaderDown: Down | undefined,
  budget: number,
): { block: GrantBlock; stop: boolean } | undefined {
  const self = down.get(m.metadata.name);
  const others = down.size - (self === undefined ? 0 : 1);
  if (others >= budget) {
    // Another candidate may be down already too: only a newcomer ends the loop.
    return { block: { kind: "budget", down: down.size, budget }, stop: self === undefined };
  }
  const leader =
    leaderDown === self ? [...down.values()].find((d) => d.leader && d !== self) : leaderDown;
  if (!isLeader(m) || leader === undefined) return undefined;
  return { block: { kind: "leader", machine: m.metadata.name, down: leader.machine }, stop: false };
}

/**
 * What grantTurns' loop decides when the budget is full before it starts: its first candidate
 * (a canary, while only canaries may go) meets the budget and stops it; with no canary left
 * to grant, or none eligible, it stops before, naming nothing.
 */
function fullBudget(
  eligible: readonly Machine[],
  canary: CanaryGate,
  down: number,
  budget: number,
): { grants: RebootTurn[]; blocked: GrantBlock | undefined } {
  const meets =
    canary.kind !== "only"
      ? eligible.length > 0
      : canary.left > 0 && eligible.some((m) => canary.pool.has(m.metadata.name));
  return { grants: [], blocked: meets ? { kind: "budget", down, budget } : undefined };
}

function trialOfThisTurn(at: string, turn: RebootTurn): boolean {
  // A record granted before priorTrialAt existed: the agent's stamp against the grant, as
  // that operator did (skew and all); every record granted since carries the field.
  if (turn.priorTrialAt === undefined) return Date.parse(at) >= Date.parse(turn.grantedAt);
  return at !== turn.priorTrialAt;
}

/**
 * The trial of the target the machine shows at the grant ("" for none): not this turn's.
 * Always written, so a record without it is one from an operator before it (trialOfThisTurn).
 */
function priorTrialOf(m: Machine, target: ReleaseRef): Pick<RebootTurn, "priorTrialAt"> {
  const trial = m.status?.lastTrial;
  return { priorTrialAt: trial?.version === target.version ? trial.at : "" };
}

/**
 * What holds every grant, in the order the Progressing condition names it: the start-up
 * grace, a stall, the failure brake, a closed window, a canary on its way or paused.
 */
function holdOf(ctx: Ctx, kept: readonly RebootTurn[], canary: CanaryGate): GrantBlock | undefined {
  const { o, s } = ctx;
  const graceEnds = o.startedAt.getTime() + s.startGraceSeconds * 1000;
  if (o.now.getTime() < graceEnds) return { kind: "grace", until: new Date(graceEnds) };
  const stalled = kept.filter((t) => t.stalledAt !== undefined);
  if (stalled.length > 0) return { kind: "stalled", turns: stalled };
  if (o.cluster.spec.rollout?.paused === true) return { kind: "paused" };
  if (ctx.brake.held) return { kind: "failed-release", brake: ctx.brake };
  const window = windowState(o.cluster.spec.disruption?.windows, o.now);
  if (window.kind === "closed") return { kind: "window", window };
  if (canary.kind === "running" || canary.kind === "paused")
    return { kind: "canary", gate: canary };
  return undefined;
}

/**
 * When the machine asked (ms), Infinity when its request carries no readable time. A machine
 * whose drain for the target timed out asks again from that moment: the back of the queue.
 */
function requestTime(m: Machine, target: ReleaseRef | undefined): number {
  const t = Date.parse(m.status?.turnRequest?.at ?? "");
  const asked = Number.isNaN(t) ? Infinity : t;
  const skip = m.status?.drainTimedOut;
  if (skip === undefined || target === undefined || skip.digest !== target.digest) return asked;
  return Math.max(asked, Date.parse(skip.at));
}

/** status.drainSkipped: the machines whose drain for the target timed out and that are still behind. */
export function drainSkippedOf(
  machines: readonly Machine[],
  target: ReleaseRef | undefined,
): DrainSkipped[] | undefined {
  if (target === undefined) return undefined;
  const list = machines.flatMap((m) => {
    const t = m.status?.drainTimedOut;
    if (t === undefined || t.digest !== target.digest || m.status?.version === target.version) {
      return [];
    }
    return [
      {
        machine: m.metadata.name,
        at: t.at,
        ...(t.pod === undefined ? {} : { pod: t.pod }),
        ...(t.podDisruptionBudget === undefined
          ? {}
          : { podDisruptionBudget: t.podDisruptionBudget }),
      },
    ];
  });
  return list.length === 0 ? undefined : list;
}

/** Oldest request first; the name breaks ties, so every copy orders the fleet alike. */
function byRequest(a: { m: Machine; asked: number }, b: { m: Machine; asked: number }): number {
  if (a.asked !== b.asked) return a.asked < b.asked ? -1 : 1;
  return a.m.metadata.name < b.m.metadata.name ? -1 : 1;
}

// ---------------------------------------------------------------------------------------
// Lost marks on Machines.

function markLost(ctx: Ctx): LostMark[] {
  const marks: LostMark[] = [];
  for (const m of ctx.o.machines) {
    const mark = lostMarkOf(ctx, m);
    if (mark !== undefined) marks.push(mark);
  }
  return marks;
}

function lostMarkOf(ctx: Ctx, m: Machine): LostMark | undefined {
  const name = m.metadata.name;
  const lost = ctx.lost.has(name);
  const step = m.status?.step;
  const alive = m.status?.conditions?.find((c) => c.type === "Alive");
  const base = { machine: name, resourceVersion: m.metadata.resourceVersion, lost };
  if (lost && step !== "Lost") {
    if (alive?.status !== "False") {
      const was = step ?? "not yet reporting";
      const message = `no heartbeat (Lease ${name}) for ${ctx.s.lostAfterSeconds} s; it was ${was}`;
      return { ...base, reason: "NoHeartbeat", step: "Lost", message };
    }
    return yieldMark(ctx, m, alive, base);
  }
  if (!lost && (step === "Lost" || alive?.status === "False")) return backMark(m, base);
  return undefined;
}

/**
 * Silent, marked Lost before, and the agent wrote its step over the mark (it keeps Alive as
 * it is): it lives. Writing Lost again would meet another write back, and so on without end:
 * yield once (HeartbeatUnseen), and mark it Lost again only REPROBE_SECONDS later.
 */
function yieldMark(
  ctx: Ctx,
  m: Machine,
  alive: MachineCondition,
  base: Pick<LostMark, "machine" | "resourceVersion" | "lost">,
): LostMark | undefined {
  const name = m.metadata.name;
  const step = m.status?.step;
  if (alive.reason !== "HeartbeatUnseen") {
    return { ...base, reason: "HeartbeatUnseen", message: unseenMessage(ctx, name, step) };
  }
  if (!reprobeDue(alive.lastTransitionTime, ctx.o.now)) return undefined;
  // In case the agent died since the yield: an idle agent writes nothing, so only its answer
  // to a mark tells.
  const message = `still no heartbeat (Lease ${name}) seen; marked Lost again to see whether its agent still answers (it was ${step ?? "not reporting"})`;
  return { ...base, reason: "NoHeartbeat", step: "Lost", message };
}

/**
 * How long the operator leaves a machine it yielded to (HeartbeatUnseen) before it marks it
 * Lost once more: a machine that died after the yield shows its agent's last step until then.
 * Ten minutes keeps STATUS at most that far behind, at one mark, one write back and one
 * HeartbeatUnseen per machine per ten minutes (the loop ran hundreds of writes a second).
 */
export const REPROBE_SECONDS = 10 * 60;

/** Measured from the yield's own record (the condition's lastTransitionTime, this side's clock). */
function reprobeDue(yieldedAt: string, now: Date): boolean {
  const at = Date.parse(yieldedAt);
  return Number.isNaN(at) || now.getTime() - at >= REPROBE_SECONDS * 1000;
}

/** A renewal seen again: Alive=True, and the step it shows again if it reads Lost. */
function backMark(
  m: Machine,
  base: Pick<LostMark, "machine" | "resourceVersion" | "lost">,
): LostMark {
  const step = m.status?.step;
  if (step !== "Lost") {
    const message = `its heartbeat returned; it shows ${step ?? "no step"} (its agent's)`;
    return { ...base, reason: "HeartbeatReturned", message };
  }
  const back = stepAfterLost(m);
  const message = `its heartbeat returned; it shows ${back} again`;
  return { ...base, reason: "HeartbeatReturned", step: back, message };
}

function unseenMessage(ctx: Ctx, name: string, step: string | undefined): string {
  return (
    `its agent writes its status (step ${step ?? "none"}) but this operator has seen no renewal ` +
    `of its heartbeat Lease liken-heartbeats/${name} for ${ctx.s.lostAfterSeconds} s: it counts ` +
    `as Lost (against the budget, no turn) and keeps the agent's step; Lost is not written ` +
    `again until a renewal is seen. Check the agent's heartbeatSeconds (at most a quarter of ` +
    `${ctx.s.lostAfterSeconds} s), its log for "heartbeat not renewed" (a refused Lease write: ` +
    `RBAC, admission), and this operator's log for "watching heartbeat Leases failed"`
  );
}
