// Which machines count as down against the budget and the leader rule: one definition, read
// by the grant (decide.ts) and by the take-back of a turn not started (overtaken.ts), so the
// two can never judge "down" differently.
import type { Machine, RebootTurn, TakenBackTurn } from "../../api/index.js";
import { isLeader } from "../view/machine-view.js";

export interface Down {
  machine: string;
  leader: boolean;
}

/**
 * The machines that count against the budget: those holding one of `turns` (a turn's `leader`
 * is what the leader rule reads, so a role edit mid-turn changes nothing), those whose turn
 * was taken back and who have not said they did not act on it (taken-back.ts), those Lost,
 * and those that report Updating without a turn (a turn record lost to a restore from backup).
 */
export function downOf(
  turns: readonly RebootTurn[],
  takenBack: readonly TakenBackTurn[],
  machines: Iterable<Machine>,
  lost: ReadonlySet<string>,
): Map<string, Down> {
  const down = new Map<string, Down>();
  for (const t of turns) down.set(t.machine, { machine: t.machine, leader: t.leader });
  for (const t of takenBack) {
    if (!down.has(t.machine)) down.set(t.machine, { machine: t.machine, leader: t.leader });
  }
  for (const m of machines) {
    const name = m.metadata.name;
    if (down.has(name)) continue;
    if (lost.has(name) || m.status?.step === "Updating") {
      down.set(name, { machine: name, leader: isLeader(m) });
    }
  }
  return down;
}
