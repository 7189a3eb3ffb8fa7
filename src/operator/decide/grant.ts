// New turns: who asks, in which order, and whether the budget, the leader rule, the brakes,
// the windows and the canaries allow each (docs/operator.md, "Rules").
import {
  type DrainSkipped,
  type Machine,
  type RebootTurn,
  type ReleaseRef,
  type TakenBackTurn,
} from "../../api/index.js";
import { firstTrialCap } from "../turns/brake.js";
import { downOf, type Down } from "../turns/down.js";
import { type CanaryGate } from "../turns/canary.js";
import { type GrantBlock } from "../turns/progress.js";
import { rfc3339 } from "../../api/time.js";
import { windowState } from "../turns/windows.js";
import { isLeader, turnAsk } from "../view/machine-view.js";

import { type Ctx, deadlineOf } from "./decision.js";
// ---------------------------------------------------------------------------------------
// New turns.

export function grantTurns(
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
export function grantInOrder(
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
export function refusalOf(
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
export function fullBudget(
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

export function trialOfThisTurn(at: string, turn: RebootTurn): boolean {
  // A record granted before priorTrialAt existed: the agent's stamp against the grant, as
  // that operator did (skew and all); every record granted since carries the field.
  if (turn.priorTrialAt === undefined) return Date.parse(at) >= Date.parse(turn.grantedAt);
  return at !== turn.priorTrialAt;
}

/**
 * The trial of the target the machine shows at the grant ("" for none): not this turn's.
 * Always written, so a record without it is one from an operator before it (trialOfThisTurn).
 */
export function priorTrialOf(m: Machine, target: ReleaseRef): Pick<RebootTurn, "priorTrialAt"> {
  const trial = m.status?.lastTrial;
  return { priorTrialAt: trial?.version === target.version ? trial.at : "" };
}

/**
 * What holds every grant, in the order the Progressing condition names it: the start-up
 * grace, a stall, the failure brake, a closed window, a canary on its way or paused.
 */
export function holdOf(
  ctx: Ctx,
  kept: readonly RebootTurn[],
  canary: CanaryGate,
): GrantBlock | undefined {
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
export function requestTime(m: Machine, target: ReleaseRef | undefined): number {
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
export function byRequest(
  a: { m: Machine; asked: number },
  b: { m: Machine; asked: number },
): number {
  if (a.asked !== b.asked) return a.asked < b.asked ? -1 : 1;
  return a.m.metadata.name < b.m.metadata.name ? -1 : 1;
}
