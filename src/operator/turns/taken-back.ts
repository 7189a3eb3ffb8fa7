// Turns taken back (Overtaken) and not yet acknowledged (seed 71742). The operator takes a turn
// back when the Machine looks not started, but a look is only as new as the agent's last
// status that landed: an agent may have re-read its turn and begun to drain while the status
// announcing it failed (a 500) or had not reached this copy's view. So a turn taken back keeps
// its place in the budget, in Cluster status.takenBackTurns, until the Machine's own status
// names that grant in status.turnTakenBack: the agent saw the record, is not disrupted (no
// drain begun, or its drain undone and its node back) and will not act on that grant. Only
// then does the record go, and the machine asks again like any other.
import type { Machine, RebootTurn, TakenBackTurn } from "../../api/index.js";
import { isBack } from "../view/machine-view.js";

export interface TakenBackView {
  recorded: readonly TakenBackTurn[];
  byName: ReadonlyMap<string, Machine>;
  /** Whether the Machine view is as new as the Cluster: a deletion is read from an absence. */
  fresh: boolean;
}

export interface TakenBackSettled {
  kept: TakenBackTurn[];
  /** Records dropped, each with why (logs, Events). */
  dropped: { entry: TakenBackTurn; why: string }[];
  /** A deletion seen on a view older than the Cluster: kept until a fresh view. */
  deferred: boolean;
}

/** The records to keep: every one whose machine has not acknowledged it (and still exists). */
export function settleTakenBack(v: TakenBackView): TakenBackSettled {
  const kept: TakenBackTurn[] = [];
  const dropped: TakenBackSettled["dropped"] = [];
  let deferred = false;
  for (const entry of v.recorded) {
    const m = v.byName.get(entry.machine);
    const why = dropReason(m, entry);
    if (why === undefined || (m === undefined && !v.fresh)) {
      deferred ||= why !== undefined;
      kept.push(entry);
      continue;
    }
    dropped.push({ entry, why });
  }
  return { kept, dropped, deferred };
}

function dropReason(m: Machine | undefined, entry: TakenBackTurn): string | undefined {
  if (m === undefined) return `Machine ${entry.machine} was deleted`;
  const resume = m.spec.resume;
  if (resume !== undefined && resume.turnGrantedAt === entry.grantedAt) {
    return `released by ${resume.by} at ${resume.at}: ${resume.reason}`;
  }
  if (acknowledged(m, entry)) return "its agent saw the turn taken back and did not act on it";
  return over(m, entry);
}

/**
 * What it began is over, as its own later status shows: back on the turn's release and Ready,
 * or its trial of that release reported (a fallback, a skip) and out of Updating. Either was
 * written after the take-back (before it, the machine ran another release and had no such
 * trial), so neither is a stale view; and it ends a record an agent that does not know
 * turnTakenBack (an older one) would keep for ever.
 */
function over(m: Machine, entry: TakenBackTurn): string | undefined {
  if (isBack(m, entry)) return `it is back on ${entry.version} and Ready`;
  const s = m.status ?? {};
  const trial = s.lastTrial;
  const ended =
    trial !== undefined &&
    trial.version === entry.version &&
    trial.result !== "Succeeded" &&
    entry.priorTrialAt !== undefined &&
    trial.at !== entry.priorTrialAt &&
    s.step !== "Updating";
  return ended ? `it reported its trial of ${entry.version} (${trial.reason})` : undefined;
}

/**
 * The Machine says it saw this very grant taken back, and shows no disruption. The grant's
 * time is compared as text: the operator wrote it, the agent copied it.
 */
export function acknowledged(m: Machine, entry: Pick<TakenBackTurn, "grantedAt">): boolean {
  const s = m.status;
  return (
    s?.turnTakenBack?.grantedAt === entry.grantedAt &&
    s.step !== "Updating" &&
    s.updateStage === undefined
  );
}

/** The record kept for a turn taken back now. */
export function takenBackEntry(t: RebootTurn, now: string): TakenBackTurn {
  return {
    machine: t.machine,
    grantedAt: t.grantedAt,
    leader: t.leader,
    version: t.version,
    ...(t.digest !== undefined ? { digest: t.digest } : {}),
    ...(t.priorTrialAt !== undefined ? { priorTrialAt: t.priorTrialAt } : {}),
    takenBackAt: now,
  };
}
