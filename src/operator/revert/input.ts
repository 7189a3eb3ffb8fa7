// What a revert decision reads and what it decides (revert.ts), shared by its parts.
import {
  type PrometheusCheck,
  type Cluster,
  type ClusterCondition,
  type KnownGood,
  type Machine,
  type ReleaseRef,
  type RevertRecord,
  type RevertReason,
  type RevokedRelease,
} from "../../api/index.js";
import type { QueryCheckView } from "./prom-check.js";
import { type FloorRead } from "../../release-decision/decide.js";

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

/** What tripped a revert: who, the condition's reason, and the gate (automatic ones only). */
export type Trigger = {
  trigger: RevertRecord["trigger"];
  reason: RevertReason;
  message: string;
  gate?: string;
};
