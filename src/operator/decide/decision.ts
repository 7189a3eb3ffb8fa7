// The operator's decision, its input and its output: what decide.ts composes from the deciders
// of turns/, channel/, revert/, status/ and peers/, and what each of them reads (Ctx).
import type { NodeAddress } from "../peers/address.js";
import {
  LOST_AFTER_SECONDS,
  START_GRACE_SECONDS,
  type AgentStep,
  type Cluster,
  type ClusterStatus,
  type Machine,
  type RebootTurn,
  type ReleaseRef,
  type RevertRecord,
} from "../../api/index.js";
import { type FloorRead, type Retarget, type RevertOutcome } from "../revert/revert.js";
import type { QueryCheckView } from "../revert/prom-check.js";
import { type BrakeView } from "../turns/brake.js";
import { type BudgetParse } from "../turns/budget.js";
import { type GrantBlock } from "../turns/progress.js";
import { seenUpTo } from "../view/freshness.js";
import { rfc3339 } from "../../api/time.js";
import { type HeartbeatView } from "../view/machine-view.js";
import type { NodeBoots } from "../view/node-boot.js";

import { type ChannelView } from "../channel/view.js";

export type { ChannelView } from "../channel/view.js";

export const NOTICED = [
  "ReleaseFailed",
  "OutsideMaintenanceWindow",
  "CanaryPaused",
  "AwaitingFirstTrial",
  "RolloutPaused",
  "ReleaseRevoked",
] as const;
export type HeldReason = (typeof NOTICED)[number];
export const isNoticed = (r: string): r is HeldReason => (NOTICED as readonly string[]).includes(r);

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
  /**
   * The boots of the Nodes whose machines may prove a release (status/evidence.ts provingNodes):
   * a machine whose Node is missing here proves nothing.
   */
  nodeBoots?: NodeBoots;
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
  /** Turns paused before their drain by this decision (turns/paused.ts), for their Events. */
  paused: RebootTurn[];
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

/** What every part of one decision reads: the observation, the settings and what it derived. */
export interface Ctx {
  o: Observed;
  s: DecideSettings;
  byName: ReadonlyMap<string, Machine>;
  lost: ReadonlySet<string>;
  target: ReleaseRef | undefined;
  brake: BrakeView;
}

/** Whether the Machine view is as new as the Cluster (freshness.ts): absences are believed only then. */
export function machinesFresh(ctx: Ctx): boolean {
  return seenUpTo(ctx.o.machinesVersion, ctx.o.cluster.metadata.resourceVersion);
}

/** A turn's deadline: `seconds` after its grant. */
export function deadlineOf(grantedAt: string, seconds: number): string {
  return rfc3339(new Date(Date.parse(grantedAt) + seconds * 1000));
}
