// The agent's side of a reboot turn, as pure functions over the API objects. The protocol
// (docs/agent.md, "Reboot turns"):
//   ask      the agent writes Machine status.turnRequest {version, digest, at} for the release
//            it staged (and, when rebootPolicy is Manual, only after spec.approval names it);
//   granted  cluster-operator records {machine, version, ...} in Cluster status.rebootTurns with
//            a write conditioned on the Cluster's resourceVersion; the agent acts only on a
//            record it reads there, and only on one for the release it staged;
//   hold     the agent keeps turnRequest while it drains, reboots and proves the trial;
//   give back the agent clears turnRequest (running the new release, or back on the old one
//            with the failure reported); the operator then removes the record.
//   taken back the operator moves a turn not started into status.takenBackTurns (Overtaken);
//            the agent acts on none there, gives back what it began (uncordon once its node is
//            back), then names the grant in Machine status.turnTakenBack; the operator counts
//            the machine as down until then (src/operator/turns/taken-back.ts).
import { rfc3339 } from "../api/time.js";
import {
  sameRelease,
  type Approval,
  type Cluster,
  type ReleaseRef,
  type RebootTurn,
  type TurnRequest,
} from "../api/types.js";

/**
 * Whether spec.approval approves `release` (for a Manual machine): exactly its version, and its
 * digest when the approval names one. An approval of an older target never carries over.
 */
export function approves(
  approval: Pick<Approval, "version" | "digest"> | undefined,
  release: ReleaseRef | undefined,
): boolean {
  return (
    release !== undefined &&
    approval?.version === release.version &&
    (approval.digest === undefined || approval.digest === release.digest)
  );
}

/** The record that grants `machine` a turn for `release`, if the Cluster holds one. */
export function findTurn(
  cluster: Cluster | undefined,
  machine: string,
  release: ReleaseRef | undefined,
): RebootTurn | undefined {
  if (cluster === undefined || release === undefined) return undefined;
  return (cluster.status?.rebootTurns ?? []).find(
    (t) =>
      t.machine === machine &&
      t.version === release.version &&
      (t.digest === undefined || t.digest === release.digest),
  );
}

/**
 * Why the cluster paused `machine`'s turn for `release` before its drain (RebootTurn.drainPause),
 * as the Observed field the agent's decision reads; absent when the turn is not paused.
 */
export function turnPausedOf(
  cluster: Cluster | undefined,
  machine: string,
  release: ReleaseRef | undefined,
): { turnPaused?: string } {
  const message = findTurn(cluster, machine, release)?.drainPause?.message;
  return message === undefined ? {} : { turnPaused: message };
}

/**
 * The grantedAt of the turn taken back from `machine` that the Cluster still counts (its
 * status.takenBackTurns), as the Observed field the agent's decision and status read.
 */
export function takenBackOf(
  cluster: Cluster | undefined,
  machine: string,
): { turnTakenBack?: string } {
  const t = cluster?.status?.takenBackTurns?.find((x) => x.machine === machine);
  return t === undefined ? {} : { turnTakenBack: t.grantedAt };
}

/**
 * The turnRequest to report: the same object while the release is unchanged (so `at` keeps the
 * time of the first ask, which the operator may use to order machines), a new one for a new
 * release, none when the agent does not want a turn (that is how it gives one back).
 */
export function turnRequestFor(
  wants: boolean,
  release: ReleaseRef | undefined,
  previous: TurnRequest | undefined,
  now: Date,
): TurnRequest | undefined {
  if (!wants || release === undefined) return undefined;
  if (previous !== undefined && sameRelease(previous, release)) return previous;
  return {
    version: release.version,
    digest: release.digest,
    at: rfc3339(now),
  };
}
