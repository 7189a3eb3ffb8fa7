// A granted turn taken back before its machine went past its drain (reason Overtaken): the
// grant was right when made, but since then another machine went down (a power cut marked
// Lost, a leader Lost) and the leader rule or the budget no longer allows it. A machine past
// its drain (checking its slot, rebooting, proving, back on the turn's release) keeps its
// turn: what it began (a trial boot) is only ended by finishing it. One that is draining gives
// its turn back, undoing its cordon, and counts until it said so (taken-back.ts). One that did not start gives nothing
// up by waiting: it asks again and is granted when the rules allow (docs/operator.md,
// "Overtaken"). The agent reads its turn again right before it drains and before it arms, so
// a turn taken back between the agent's look and its act is caught before the reboot.
import type { Machine, RebootTurn, TakenBackTurn } from "../../api/index.js";
import { downOf, type Down } from "./down.js";

export interface Overtaken {
  turn: RebootTurn;
  message: string;
}

export interface OvertakenView {
  turns: readonly RebootTurn[];
  /** Turns taken back earlier and not acknowledged yet: down until then (taken-back.ts). */
  takenBack: readonly TakenBackTurn[];
  byName: ReadonlyMap<string, Machine>;
  lost: ReadonlySet<string>;
  budget: number;
  /**
   * Whether the Machine view is at least as new as the Cluster: "not started" is read from
   * what a Machine does not say yet, and an older view says it wrongly (freshness.ts).
   */
  fresh: boolean;
}

/**
 * Whether the machine acted on its turn, as its Machine says (or it is back on the release). A
 * drain announced (stage Draining) counts as started: the last status stored may be older than
 * the agent, already rebooting, and a trial boot must find its turn (seed 91374, which broke
 * reboot-without-turn when Draining turns were taken back to close seed 70695).
 */
export function started(m: Machine | undefined, t: RebootTurn): boolean {
  const s = m?.status;
  if (m === undefined || s === undefined) return true; // no word: nothing taken back on it
  if (t.returnedAt !== undefined || t.stalledAt !== undefined) return true;
  return s.step === "Updating" || s.updateStage !== undefined || s.version === t.version;
}

/**
 * The turns to keep and those overtaken. The machines down whatever happens are those of
 * down.ts (the grant's own definition) over the started turns; the turns not started are then
 * kept oldest grant first (the list's order) while the budget and the leader rule allow each,
 * exactly as a grant is judged (decide.ts grantTurns).
 */
export function overtake(v: OvertakenView): {
  kept: RebootTurn[];
  overtaken: Overtaken[];
  /** Some turn would be taken back, but the Machine view is older than the Cluster: kept. */
  deferred: boolean;
} {
  const r = judge(v);
  if (v.fresh || r.overtaken.length === 0) return { ...r, deferred: false };
  return { kept: [...v.turns], overtaken: [], deferred: true };
}

function judge(v: OvertakenView): { kept: RebootTurn[]; overtaken: Overtaken[] } {
  const waiting = v.turns.filter((t) => !started(v.byName.get(t.machine), t));
  if (waiting.length === 0) return { kept: [...v.turns], overtaken: [] };
  const waits = new Set(waiting);
  const down = downOf(
    v.turns.filter((t) => !waits.has(t)),
    v.takenBack,
    v.byName.values(),
    v.lost,
  );
  const out = new Set<RebootTurn>();
  const overtaken: Overtaken[] = [];
  for (const t of waiting) {
    const why = reasonOf(t, down, v.budget);
    if (why === undefined) {
      down.set(t.machine, { machine: t.machine, leader: t.leader });
      continue;
    }
    out.add(t);
    overtaken.push({ turn: t, message: `taken back before it started: ${why}; it asks again` });
  }
  return { kept: v.turns.filter((t) => !out.has(t)), overtaken };
}

export function reasonOf(
  t: RebootTurn,
  down: ReadonlyMap<string, Down>,
  budget: number,
): string | undefined {
  const others = [...down.values()].filter((d) => d.machine !== t.machine);
  const leader = others.find((d) => d.leader);
  if (t.leader && leader !== undefined) {
    return `leader ${leader.machine} is down since the grant, and one leader is down at a time`;
  }
  // A holder that is Lost itself is judged as one more: when it comes back it acts on the turn
  // at once, a disruption the budget must still have room for (seed 2013).
  if (others.length < budget) return undefined;
  return `${others.length} machines are down or hold a turn (${others
    .map((d) => d.machine)
    .slice(0, 5)
    .join(", ")}), the budget allows ${budget}`;
}
