// Turns held: which ends now (returned, rolled back, given back, drain timed out, deleted,
// resumed), which soaks, which stalls at its deadline (docs/operator.md, "Rules").
import { type Machine, type RebootTurn } from "../../api/index.js";
import { isBack } from "../view/machine-view.js";
import { stallDetail } from "../turns/progress.js";
import { rfc3339 } from "../../api/time.js";

import {
  type Ctx,
  type ReleaseReason,
  type TurnRelease,
  type TurnStall,
  deadlineOf,
  machinesFresh,
} from "./decision.js";
import { trialOfThisTurn } from "./grant.js";
// ---------------------------------------------------------------------------------------
// Existing turns: release, stall, or keep.

export function settleTurns(
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
export function onAbsence(r: TurnRelease): boolean {
  return r.reason === "GivenBack" || r.reason === "MachineDeleted";
}

export function releaseOf(ctx: Ctx, turn: RebootTurn): TurnRelease | undefined {
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

export type Found = { reason: ReleaseReason; message: string } | undefined;

/** The machine's drain for this turn timed out and it uncordoned: the turn is given back. */
export function drainTimedOut(m: Machine, turn: RebootTurn): Found {
  const t = m.status?.drainTimedOut;
  if (t === undefined || t.turnGrantedAt !== turn.grantedAt) return undefined;
  const pdb = t.podDisruptionBudget ? ` (PodDisruptionBudget ${t.podDisruptionBudget})` : "";
  const pod = t.pod ? `, held by pod ${t.pod}${pdb}` : "";
  return {
    reason: "DrainTimedOut",
    message: `its drain timed out at ${t.at}${pod}; it uncordoned and goes to the back of the queue: ${t.message}`,
  };
}

export function returned(m: Machine, turn: RebootTurn): Found {
  if (!isBack(m, turn)) return undefined;
  return { reason: "Returned", message: `back on ${turn.version} and Ready` };
}

/**
 * Soak (spec.rollout.soakSeconds > 0): a machine back and Ready keeps its turn, and so its
 * slot of the budget, until it stayed Ready that long as this operator saw it (returnedAt,
 * on the operator's clock). Leaving Ready restarts the soak. Undefined: not soaking (the turn
 * goes on through the other rules); "done": release it; otherwise the turn to keep.
 */
export function soakOf(ctx: Ctx, turn: RebootTurn): RebootTurn | "done" | undefined {
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
export function rolledBack(m: Machine, turn: RebootTurn): Found {
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
export function givenBack(m: Machine, turn: RebootTurn): Found {
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
