// One simulated run: a Cluster, 20-200 machines with A/B slots and a bootloader, their agents
// (the real src/agent/steps.ts decide), several operator copies (the real
// src/operator/decide/decide.ts decide), the simulated API server (api.ts), a virtual clock of one
// step per simulated second, and the faults of a schedule (faults.ts). Everything observed
// goes into a history the invariant checker reads (src/invariants).
//
// This file is the clock: the order in which each second's parts run, which is the order of the
// run's draws and of its history (a seed replays only while it stays the same). The parts, over
// the one state they share (world-state.ts): the world at second 0 (world-start.ts), the faults
// (fault-effects.ts), the machines beneath their agents (host.ts), the agents (agent.ts,
// agent-act.ts) and the operator copies (operator-copies.ts).
import type { Observation } from "../invariants/index.js";
import { effectiveTarget } from "../release-decision/view.js";
import type { Fault } from "./faults.js";
import type { Mutant } from "./mutants.js";
import { publisherTick } from "./channel.js";
import { agentTick } from "./agent.js";
import { applyFault, heal } from "./fault-effects.js";
import { bootUp, kubeletTick } from "./host.js";
import { operatorTick } from "./operator-copies.js";
import { startWorld } from "./world-start.js";
import {
  at,
  observeCluster,
  observeMachine,
  readCluster,
  readMachine,
  T0,
  type RunShape,
  type World,
} from "./world-state.js";

export { V1, V2, V3, type RunShape } from "./world-state.js";

export interface RunResult {
  history: Observation[];
  seconds: number;
}

export function runWorld(
  seed: number,
  shape: RunShape,
  faults: readonly Fault[],
  mutant: Mutant | undefined,
): RunResult {
  const w = startWorld(seed, shape, mutant);
  const byTick = new Map<number, Fault[]>();
  for (const f of faults) byTick.set(f.at, [...(byTick.get(f.at) ?? []), f]);

  // --- the clock ----------------------------------------------------------------------------
  /** One simulated second; false once the fleet settled after the faults ended. */
  function second(t: number): boolean {
    w.now = T0 + t * 1000;
    if (w.channel !== undefined) publisherTick(w.channel, w.now);
    for (const f of byTick.get(t) ?? []) applyFault(w, f);
    if (t === shape.healAt) heal(w);
    if (t > shape.healAt && t % 10 === 0 && settled(w)) return false;
    for (const s of w.sims) {
      if (!s.powered && --s.downFor <= 0) bootUp(w, s);
    }
    for (const s of w.sims) kubeletTick(w, s);
    for (const s of w.sims) agentTick(w, s);
    for (const c of w.copies) operatorTick(w, c);
    return true;
  }

  for (let t = 0; t < shape.seconds && second(t); t++);
  // The end: every fault healed, the fleet given time to settle, then judged.
  for (const s of w.sims) observeMachine(w, s.name);
  observeCluster(w);
  w.history.push({ kind: "end", at: at(w) + 1 });
  return { history: w.history, seconds: shape.seconds };
}

/** After the faults: every machine on the target or failed it, and no turn held. */
function settled(w: World): boolean {
  const c = readCluster(w).obj;
  const target = effectiveTarget(c);
  if ((c.status?.rebootTurns ?? []).length > 0) return false;
  return w.sims.every((s) => {
    const st = readMachine(w, s.name)?.obj.status;
    return (
      target === undefined ||
      (st?.digest === target.digest && st.step === "Ready") ||
      s.memory.failed.includes(target.digest)
    );
  });
}
