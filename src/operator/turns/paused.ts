// A started turn paused before its drain (RebootTurn.drainPause). The question: may a turn whose
// machine said it started (step Updating) still begin its drain now? A machine marked Lost, or a
// leader down, since the grant can fill the budget between the machine's announcement and its
// first cordon (seeds 70695 and 90014: the announcement stored, a Lost mark the same second,
// the drain a second later, one machine more down than the budget allows).
//
// Taking such a turn back is wrong: the stored "Updating" may be older than the agent, which may
// be rebooting already, and its trial boot must find its turn (seeds 90840, 90954, 91374). So
// the turn is kept and paused instead. The agent reads its turn again right before the first
// cordon: paused, it does not drain and says so (UpdatePending), after which the turn is one not
// started and overtaken.ts judges it like any other (kept, or taken back to ask again); an agent
// that began its drain goes on, being down already. A turn is only paused while it may still be
// before its drain, and judged as the grant is, with every other turn counted down: holders
// that may not have drained could have, and a pause is always safe, only late.
import type { Machine, RebootTurn, TakenBackTurn } from "../../api/index.js";
import { truncate } from "../../api/bounds.js";
import { downOf } from "./down.js";
import { reasonOf, started } from "./overtaken.js";

/** The stages an agent writes once its drain is done (types.ts UPDATE_STAGES after Draining). */
const PAST_DRAIN = new Set(["CheckingSlot", "Rebooting", "Proving", "Rejoining"]);

/**
 * Whether the machine may still be before its drain for this turn although it started: its
 * last status announces the turn (Updating, stage Draining or none) and nothing says it drained.
 */
export function beforeItsDrain(m: Machine | undefined, t: RebootTurn): boolean {
  if (!started(m, t)) return false;
  if (t.returnedAt !== undefined || t.stalledAt !== undefined) return false;
  const s = m?.status;
  if (s === undefined) return true;
  if (s.version === t.version) return false;
  return s.updateStage === undefined || !PAST_DRAIN.has(s.updateStage);
}

export interface PauseView {
  turns: readonly RebootTurn[];
  takenBack: readonly TakenBackTurn[];
  byName: ReadonlyMap<string, Machine>;
  lost: ReadonlySet<string>;
  budget: number;
  now: string;
}

/** The turns with their pauses set or lifted, and those paused by this decision. */
export function pauseDrains(v: PauseView): { turns: RebootTurn[]; paused: RebootTurn[] } {
  const paused: RebootTurn[] = [];
  // Who is down does not change from one turn to the next here: read once (a pass over the
  // fleet, up to 5,000 machines), not once per turn. reasonOf leaves the turn's own machine out.
  const down = downOf(v.turns, v.takenBack, v.byName.values(), v.lost);
  const turns = v.turns.map((t): RebootTurn => {
    const mayDrain = !beforeItsDrain(v.byName.get(t.machine), t);
    const why = mayDrain ? undefined : reasonOf(t, down, v.budget);
    if (why === undefined) {
      if (t.drainPause === undefined) return t;
      const { drainPause: _lifted, ...rest } = t;
      return rest;
    }
    const message = truncate(`paused before its drain: ${why}`, 1024);
    if (t.drainPause?.message === message) return t;
    const next = { ...t, drainPause: { since: t.drainPause?.since ?? v.now, message } };
    if (t.drainPause === undefined) paused.push(next);
    return next;
  });
  return { turns, paused };
}
