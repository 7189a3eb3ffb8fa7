// The Progressing condition and the stall message, pure: what a person reads in
// `kubectl describe cluster` to know why no turn is granted and what to do.
import type {
  Cluster,
  ClusterCondition,
  ClusterPhase,
  Machine,
  RebootTurn,
  ReleaseRef,
} from "../../api/index.js";
import { failedList, type BrakeView, type FirstTrialCap } from "./brake.js";
import type { BudgetParse } from "./budget.js";
import type { CanaryGate } from "./canary.js";
import { findCondition } from "../view/conditions.js";
import { targetView, type TargetView } from "../../release-decision/view.js";
import { isHeld, turnAsk } from "../view/machine-view.js";
import { rfc3339 } from "../../api/time.js";
import { duration } from "../view/text.js";
import { wallClock, type WindowState } from "./windows.js";
import { CLUSTER_STATUS_BOUNDS, joinBounded, maxLengthOf } from "../../api/bounds.js";

/** The Progressing condition's message bound (the CRD's conditions[].message maxLength). */
const MESSAGE_MAX = maxLengthOf(CLUSTER_STATUS_BOUNDS, "conditions[].message");
/**
 * The soaking machines' part of the message: an eighth of it, ~60 machines with their times;
 * the rest of the message (turns, budget, brakes) then always has room.
 */
const SOAKING_MAX = MESSAGE_MAX / 8;

/** Why the operator granted no (further) turn. */
export type GrantBlock =
  | { kind: "no-target" }
  | { kind: "grace"; until: Date }
  | { kind: "stalled"; turns: RebootTurn[] }
  | { kind: "budget"; down: number; budget: number }
  | { kind: "leader"; machine: string; down: string }
  | { kind: "failed-release"; brake: BrakeView }
  | { kind: "window"; window: Extract<WindowState, { kind: "closed" }> }
  | { kind: "canary"; gate: Extract<CanaryGate, { kind: "running" | "paused" }> }
  | { kind: "first-trial"; cap: FirstTrialCap }
  | { kind: "paused" };

type Progressing = Extract<ClusterCondition, { type: "Progressing" }>;

export interface ProgressInput {
  cluster: Cluster;
  machines: readonly Machine[];
  turns: readonly RebootTurn[];
  phase: ClusterPhase;
  blocked: GrantBlock | undefined;
  budget: BudgetParse;
  now: Date;
  startedAt: Date;
  graceSeconds: number;
  target: ReleaseRef | undefined;
  lost: ReadonlySet<string>;
  brake: BrakeView;
}

/**
 * The Progressing condition to record, or undefined to leave the recorded one alone.
 *
 * During its start-up grace a copy says when it resumes granting (StartupGrace; its
 * lastTransitionTime is the copy's start, so the resume time is lastTransitionTime + grace).
 * With two copies running, one in its grace must not hide the other's live state, or the
 * two would overwrite each other for 40 s: a copy in grace leaves alone a condition that was
 * written after it started by a copy past its grace, and a StartupGrace of a copy that
 * started later than itself.
 */
export function progressingCondition(p: ProgressInput): Progressing | undefined {
  const at = rfc3339(p.now);
  const gen = p.cluster.metadata.generation;
  const cond = (
    status: Progressing["status"],
    reason: Progressing["reason"],
    message: string,
    lastTransitionTime?: string,
  ): Progressing => ({
    type: "Progressing",
    status,
    reason,
    message,
    lastTransitionTime: lastTransitionTime ?? transitionTime(p, reason, status, at),
    ...(gen === undefined ? {} : { observedGeneration: gen }),
  });
  const view = targetView(p.cluster, p.now);
  if (view.kind === "revoked") {
    return cond("False", "ReleaseRevoked", revokedMessage(p.cluster, view));
  }
  if (view.kind === "held" && p.target === undefined) {
    return cond("False", "NoTarget", view.hold.message);
  }
  if (p.target === undefined) {
    return cond("False", "NoTarget", noTargetMessage(p.cluster));
  }
  const stalled = p.turns.filter((t) => t.stalledAt !== undefined);
  if (stalled.length > 0) {
    return cond("False", "RolloutStalled", stalledMessage(p, stalled));
  }
  if (p.cluster.spec.rollout?.paused === true) {
    return cond("True", "RolloutPaused", pausedMessage(p));
  }
  if (p.phase === "Ready") {
    return cond("True", "RolloutComplete", completeMessage(p, p.target.version));
  }
  const graceEnds = new Date(p.startedAt.getTime() + p.graceSeconds * 1000);
  if (p.now < graceEnds) {
    if (yieldsToOtherCopy(p)) return undefined;
    return cond(
      "True",
      "StartupGrace",
      `cluster-operator started at ${rfc3339(p.startedAt)} and grants no reboot turn for its first ${p.graceSeconds} s: granting resumes at ${rfc3339(graceEnds)}`,
      rfc3339(p.startedAt),
    );
  }
  const brake = brakeCondition(p);
  if (brake !== undefined) return cond(...brake);
  const waiting = p.machines.filter((m) => turnAsk(m, p.target).kind === "awaiting-approval");
  if (p.turns.length === 0 && waiting.length > 0 && !anyEligible(p)) {
    const names = waiting.map((m) => m.metadata.name);
    return cond(
      "True",
      "WaitingForApproval",
      `${names.length} machine(s) staged ${p.target.version} and wait for approval (rebootPolicy Manual): ${list(names)}; approve each with \`liken approve-reboot ${p.cluster.metadata.name} <machine>\``,
    );
  }
  return cond("True", "RolloutProgressing", progressingMessage(p));
}

/** A brake that holds or paces the grants, in the order the condition names them. */
function brakeCondition(
  p: ProgressInput,
): [Progressing["status"], Progressing["reason"], string] | undefined {
  if (p.brake.held) return ["False", "ReleaseFailed", releaseFailedMessage(p, p.brake)];
  const b = p.blocked;
  if (b?.kind === "window") {
    return ["True", "OutsideMaintenanceWindow", windowMessage(p, b.window)];
  }
  if (b?.kind === "canary" && b.gate.kind === "paused") {
    return ["True", "CanaryPaused", canaryMessage(p, b.gate)];
  }
  if (b?.kind === "first-trial") {
    return ["True", "AwaitingFirstTrial", firstTrialMessage(p, b.cap)];
  }
  return undefined;
}

function transitionTime(
  p: ProgressInput,
  reason: Progressing["reason"],
  status: Progressing["status"],
  at: string,
): string {
  const old = findCondition(p.cluster.status?.conditions, "Progressing");
  return old !== undefined && old.reason === reason && old.status === status
    ? old.lastTransitionTime
    : at;
}

function yieldsToOtherCopy(p: ProgressInput): boolean {
  const old = findCondition(p.cluster.status?.conditions, "Progressing");
  if (old === undefined) return false;
  const written = Date.parse(old.lastTransitionTime);
  if (old.reason === "StartupGrace") return written > p.startedAt.getTime();
  return written >= p.startedAt.getTime();
}

function anyEligible(p: ProgressInput): boolean {
  return p.machines.some((m) => turnAsk(m, p.target).kind === "eligible");
}

function revokedMessage(c: Cluster, v: Extract<TargetView, { kind: "revoked" }>): string {
  const name = c.metadata.name;
  return (
    `spec.version names ${v.from.version}, which this Cluster revoked at ${v.revoked.at} ` +
    `(${v.revoked.reason}${v.revoked.message ? `: ${v.revoked.message}` : ""}): no machine takes it. ` +
    `Set spec.version to another release (kubectl edit cluster ${name}), or clear the revocation ` +
    `with \`liken rollout unrevoke ${name} ${v.from.version}\` if the release is good after all.`
  );
}

function pausedMessage(p: ProgressInput): string {
  const name = p.cluster.metadata.name;
  const held =
    p.turns.length > 0 ? `; turns held finish: ${list(p.turns.map((t) => t.machine))}` : "";
  const waiting = p.machines.filter((m) => turnAsk(m, p.target).kind === "eligible").length;
  return (
    `spec.rollout.paused: no new reboot turn for any machine (downloads and staging go on); ` +
    `${waiting} machine(s) staged ${p.target?.version ?? ""} and wait${held}. ` +
    `Resume with \`liken rollout resume ${name}\`.`
  );
}

function noTargetMessage(c: Cluster): string {
  const mode = c.spec.releases.trust?.mode ?? "pinned";
  if (mode !== "pinned") {
    return `the signed channel vouches for no release to take now (trust mode ${mode}); ChannelTrusted says why (liken status ${c.metadata.name})`;
  }
  return `spec.version is not set; set it to a release of spec.releases.catalog to roll it out (kubectl edit cluster ${c.metadata.name})`;
}

/** RolloutComplete's message: the machines a person holds are named apart (spec.hold). */
function completeMessage(p: ProgressInput, target: string): string {
  const held = p.machines.filter((m) => isHeld(m) && m.status?.version !== target);
  if (held.length === 0) return `every machine runs ${target}`;
  const names = list(held.map((m) => m.metadata.name));
  return `every machine runs ${target} but those held at their release by a person (liken machine unhold releases them): ${names}`;
}

function progressingMessage(p: ProgressInput): string {
  const target = p.target?.version ?? "";
  const behind = p.machines.filter((m) => m.status?.version !== target && !isHeld(m)).length;
  const turns = p.turns.map((t) => t.machine);
  let msg = `${behind} of ${p.machines.length} machine(s) still to move to ${target}; budget ${p.budget.text}`;
  msg += turns.length > 0 ? `; turns held by ${list(turns)}` : "; no turn held";
  const soak = p.cluster.spec.rollout?.soakSeconds ?? 0;
  const soaking = p.turns.filter((t) => t.returnedAt !== undefined);
  if (soaking.length > 0) {
    const until = (t: RebootTurn): string =>
      `${t.machine} until ${rfc3339(new Date(Date.parse(t.returnedAt ?? "") + soak * 1000))}`;
    msg += `; back and soaking (spec.rollout.soakSeconds ${soak}): ${joinBounded(soaking.map(until), ", ", SOAKING_MAX)}`;
  }
  const b = p.blocked;
  if (b?.kind === "budget") msg += `; ${b.down} machine(s) down, the budget is full`;
  if (b?.kind === "leader") {
    msg += `; leader ${b.machine} waits: leader ${b.down} is down (one leader at a time)`;
  }
  if (b?.kind === "canary") {
    msg += `; the canary (${list(b.gate.machines)}) is on its way to ${target}: no other turn until it is back and Ready`;
  }
  const skipped = p.machines.filter(
    (m) => m.status?.drainTimedOut?.digest === p.target?.digest && m.status?.version !== target,
  );
  if (skipped.length > 0) {
    const one = (m: Machine): string => {
      const t = m.status?.drainTimedOut;
      return `${m.metadata.name}${t?.pod ? ` (pod ${t.pod}${t.podDisruptionBudget ? `, PodDisruptionBudget ${t.podDisruptionBudget}` : ""})` : ""}`;
    };
    msg += `; drain timed out and skipped, back of the queue: ${list(skipped.map(one))}`;
  }
  if (!p.budget.ok) msg += `; ${p.budget.problem}`;
  return msg;
}

function releaseFailedMessage(p: ProgressInput, brake: BrakeView): string {
  const cluster = p.cluster.metadata.name;
  const target = p.target?.version ?? "";
  const accepted = brake.failed.length - brake.counted.length;
  const also = accepted > 0 ? ` (${accepted} earlier failure(s) were accepted by a resume)` : "";
  return (
    `${brake.counted.length} machine(s) failed their trial of ${target}, spec.rollout.maxFailedTrials is ${brake.limit}${also}: ${failedList(brake.counted)}. ` +
    `No further turn for ${target}; machines that staged it keep it staged. ` +
    `To go on, set spec.version to another release (kubectl edit cluster ${cluster}), ` +
    `or allow more trials with \`liken rollout resume ${cluster} --failed-release\`.`
  );
}

function windowMessage(p: ProgressInput, w: Extract<WindowState, { kind: "closed" }>): string {
  const waiting = p.machines.filter((m) => turnAsk(m, p.target).kind === "eligible").length;
  const head = `no maintenance window of spec.disruption.windows is open; ${waiting} machine(s) staged ${p.target?.version ?? ""} and wait for one (downloads and staging go on)`;
  if (w.next === undefined) {
    return `${head}; no window can open: see the SpecValid condition`;
  }
  const tz = w.next.window.timeZone ?? "UTC";
  return `${head}; the next opens ${wallClock(w.next.at, tz)} (${rfc3339(w.next.at)}) for ${w.next.window.duration}`;
}

function firstTrialMessage(p: ProgressInput, cap: FirstTrialCap): string {
  const target = p.target?.version ?? "";
  const holding = new Set(p.turns.map((t) => t.machine));
  const waiting = p.machines.filter(
    (m) => !holding.has(m.metadata.name) && turnAsk(m, p.target).kind === "eligible",
  ).length;
  const allowed = cap.limit - cap.failed;
  const failed = cap.failed > 0 ? `, ${cap.failed} failed` : "";
  return (
    `waiting for the first trial of ${target} (${list(cap.trying)}): until one machine proved it, ` +
    `at most ${allowed} machine(s) try it at a time (spec.rollout.maxFailedTrials ${cap.limit}${failed}), ` +
    `so a bad release costs no more machines than the brake allows to fail; ${waiting} machine(s) staged it and wait. ` +
    `Once one trial succeeded the budget applies (${p.budget.text}); ` +
    `spec.rollout.maxFailedTrials 0 turns the brake and this limit off.`
  );
}

function canaryMessage(p: ProgressInput, gate: Extract<CanaryGate, { kind: "paused" }>): string {
  const cluster = p.cluster.metadata.name;
  const soak =
    gate.until === undefined
      ? ""
      : `, or by itself at ${rfc3339(gate.until)} if they stay Ready (spec.rollout.canary.soakSeconds)`;
  return (
    `the canary machine(s) ${list(gate.machines)} run ${p.target?.version ?? ""} and are Ready since ${gate.readyAt}; ` +
    `the rest of the fleet waits. Check them, then go on with \`liken rollout continue ${cluster}\`${soak}.`
  );
}

function stalledMessage(p: ProgressInput, stalled: readonly RebootTurn[]): string {
  const cluster = p.cluster.metadata.name;
  const parts = stalled.map((t) => {
    const m = p.machines.find((x) => x.metadata.name === t.machine);
    return stallDetail(t, m, p.lost.has(t.machine));
  });
  const first = stalled[0]?.machine ?? "<machine>";
  const next = ` No more turns until a person examines it: \`liken rollout status ${cluster}\`, then \`liken rollout resume ${cluster} ${first} --reason "..."\`.`;
  // Many turns can stall at once (a wide budget, a rack that lost power): name as many as the
  // condition holds and keep the way out, which comes last, whole.
  return `${joinBounded(parts, " ", MESSAGE_MAX - next.length)}${next}`;
}

/** One stalled turn, for the condition, the Event and `liken rollout status`. */
export function stallDetail(t: RebootTurn, m: Machine | undefined, lost: boolean): string {
  // Absolute times and the duration up to the stall, never "ago": the condition must not
  // change (and cost a write) every second.
  const deadline = t.deadline ? ` (deadline ${t.deadline})` : "";
  let msg =
    t.stalledAt === undefined
      ? `Machine ${t.machine} holds a reboot turn for ${t.version} granted at ${t.grantedAt}${deadline}.`
      : `Machine ${t.machine} holds a reboot turn for ${t.version} granted at ${t.grantedAt} and had not come back ${duration(Date.parse(t.stalledAt) - Date.parse(t.grantedAt))} later${deadline}.`;
  if (m === undefined) return `${msg} Its Machine no longer exists.`;
  const s = m.status ?? {};
  const where = s.updateStage ? `${s.step ?? "?"} (${s.updateStage})` : (s.step ?? "no step");
  msg += ` It was in step ${where}, running ${s.version ?? "an unknown release"}.`;
  const b = s.drainBlocker;
  if (b !== undefined) {
    const pdb = b.podDisruptionBudget
      ? ` held by PodDisruptionBudget ${b.podDisruptionBudget}`
      : "";
    msg += ` Its drain is blocked by pod ${b.pod}${pdb} since ${b.since}: ${b.message}.`;
  }
  msg += lost
    ? ` It is Lost: no heartbeat (Lease liken-heartbeats/${t.machine}).`
    : " Its heartbeat is alive.";
  return msg;
}

function list(names: readonly string[]): string {
  return names.length <= 10
    ? names.join(", ")
    : `${names.slice(0, 10).join(", ")} and ${names.length - 10} more`;
}
