// What the operator reads from one Machine, pure: is it Lost, does it ask for a turn, may
// it have one (policy, approval), is it down. The contract with the agent is the API
// objects; docs/operator.md states it from the agent's side.
import {
  sameRelease,
  type AgentStep,
  type Cluster,
  type Machine,
  type RebootTurn,
  type ReleaseRef,
} from "../../api/index.js";
import { effectiveTarget } from "../../release-decision/view.js";
import { approves } from "../../coordinator/turn.js";

/**
 * What the operator knows of a machine's heartbeat: the reading of ITS OWN monotonic clock
 * (ms, performance.now()) at which it last saw the machine's Lease renewed (renewTime
 * changed), or undefined when it has seen no renewal since `since` (its start, or its wake-up
 * after a pause, on the same clock). The operator's clock, not the agent's renewTime, decides,
 * as the node lifecycle controller does with kubelet Leases: a machine whose clock is off by
 * a minute must not read Lost (or alive) for it. And its monotonic clock, not its wall clock:
 * a wall clock stepped back by an hour (NTP, a person) would otherwise make a machine that
 * died a minute ago look renewed in the future, and hide it for that hour.
 */
export interface HeartbeatView {
  renewedAt: ReadonlyMap<string, number>;
  since: number;
}

/**
 * Lost: no heartbeat for `lostAfterSeconds` on the operator's monotonic clock (`mono`). A
 * machine whose renewal this copy has not seen yet is judged from `since`: it keeps its last
 * status until 40 s pass (the page), unless another copy already recorded it Lost, which this
 * copy honours until it sees a renewal (so two copies agree instead of overwriting each
 * other's view).
 */
export function isLost(
  m: Machine,
  hb: HeartbeatView,
  mono: number,
  lostAfterSeconds: number,
): boolean {
  const limit = lostAfterSeconds * 1000;
  const seen = hb.renewedAt.get(m.metadata.name);
  if (seen !== undefined) return mono - seen >= limit;
  if (m.status?.step === "Lost") return true;
  return mono - hb.since >= limit;
}

/** When this copy last saw the machine alive (a renewal, or its own start), monotonic ms. */
export function lastSeenAlive(m: Machine, hb: HeartbeatView): number {
  return hb.renewedAt.get(m.metadata.name) ?? hb.since;
}

/**
 * The fleet's target: the release decision (src/release-decision/decide.ts, read through
 * src/release-decision/view.ts); `now`, the operator's clock, also judges the channel trust's expiry.
 */
export function targetOf(cluster: Cluster, now?: Date): ReleaseRef | undefined {
  return effectiveTarget(cluster, now);
}

export type TurnAsk =
  /** Staged the target, asks, and may have a turn (Auto, or Manual approved for it). */
  | { kind: "eligible"; at: string }
  /** Staged the target and asks, but rebootPolicy is Manual and nobody approved it. */
  | { kind: "awaiting-approval" }
  | { kind: "none" };

/**
 * Whether the machine asks for a reboot turn for the Cluster's target: it staged that exact
 * release (version and catalog digest), asks for it (status.turnRequest names the same
 * release), does not already run it, and reports UpdatePending or RebootPending. An
 * approval counts only for exactly the staged version (and digest when it names one): an
 * approval for an older target never carries over to a newer one.
 */
export function turnAsk(m: Machine, target: ReleaseRef | undefined): TurnAsk {
  // Held by a person (liken machine hold): skipped by the rollout, whatever an agent asks.
  if (isHeld(m)) return { kind: "none" };
  const s = m.status;
  const staged = s?.staged;
  if (target === undefined || s === undefined || staged === undefined) return { kind: "none" };
  if (!sameRelease(staged, target) || s.version === target.version) return { kind: "none" };
  if (s.step !== "UpdatePending" && s.step !== "RebootPending") return { kind: "none" };
  const approved =
    (m.spec.rebootPolicy ?? "Manual") === "Auto" || approves(m.spec.approval, staged);
  // A Manual agent may wait for the approval before it asks (docs/agent.md): RebootPending
  // with the target staged is waiting for a person, with or without a turnRequest.
  if (!approved) return { kind: "awaiting-approval" };
  const req = s.turnRequest;
  if (req === undefined || !sameRelease(req, target)) return { kind: "none" };
  return { kind: "eligible", at: req.at };
}

/** A person holds the machine at its release (spec.hold): the rollout goes on without it. */
export function isHeld(m: Machine): boolean {
  return m.spec.hold !== undefined;
}

export function isLeader(m: Machine): boolean {
  return m.spec.role === "Leader";
}

/**
 * The step a machine shows again when its heartbeat returns and it still reads Lost (the
 * agent may write its own step at any time; this is the operator's best reading of the
 * status the agent left, so STATUS never stays Lost for a live machine).
 */
export function stepAfterLost(m: Machine): AgentStep {
  const s = m.status ?? {};
  if (s.updateStage !== undefined) return "Updating";
  if (s.staged !== undefined && s.turnRequest !== undefined) {
    const manual = (m.spec.rebootPolicy ?? "Manual") === "Manual";
    return manual && !approves(m.spec.approval, s.staged) ? "RebootPending" : "UpdatePending";
  }
  if (s.progress !== undefined && s.progress.percent < 100) return "Downloading";
  const failed = s.target && s.failedReleases?.some((f) => f.digest === s.target?.digest);
  if (failed && s.version !== s.target?.version) return "Failed";
  return "Ready";
}

/** Back on a turn's release and Ready: a held turn returns, a taken-back one is over. */
export function isBack(m: Machine | undefined, turn: Pick<RebootTurn, "version">): boolean {
  const s = m?.status;
  return s?.version === turn.version && s.step === "Ready";
}
