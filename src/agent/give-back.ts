// A turn held after a drain began: whether the machine is disrupted, and giving the turn back
// only once this boot rejoined (the machine is still down as the budget counts it until then).
// Shared by every branch of the decision that ends a turn without a promotion.
import type { AgentStep } from "../api/types.js";
import { d, WAIT, type Action, type Decision, type Observed } from "./decision.js";
import type { Phase } from "./phases.js";
import { rejoinOf } from "./rejoin.js";

/** Whether a drain began (or finished) and its turn has not been given back since. */
export function disrupted(o: Pick<Observed, "drainedDigest" | "drainBegunDigest">): boolean {
  return o.drainedDigest !== undefined || o.drainBegunDigest !== undefined;
}

/**
 * Gives a held turn back (uncordon, forget the drain) only once the machine is back: its Node
 * shows THIS boot Ready since it (rejoin.ts), the same evidence a promotion needs. Until then
 * the machine is still down as the budget counts it, so its status keeps the operator from
 * releasing the turn (step Updating, stage Rejoining) and granting it to the next machine: a
 * fallback reported at once freed the budget while the old slot's kubelet was still starting,
 * one machine more down than allowed (found by `npm run simulate`, docs/simulation.md). A
 * drain with no reboot since passes at once: the Node still shows this boot, Ready.
 */
export function giveBack(o: Observed, phase: Phase, step: AgentStep, reason: string): Decision {
  const r = rejoinOf(o);
  if (r.kind === "rejoined") return d(phase, step, { kind: "release-turn", reason }, reason);
  return rejoining(`${reason}; the turn is kept until this boot rejoins: ${r.why}`);
}

/** The status of a machine that holds its turn until it rejoins (giveBack). */
export function rejoining(why: string, action: Action = WAIT): Decision {
  return d("Rejoining", "Updating", action, why, { stage: "Rejoining" });
}
