// A simulated machine's agent, one turn per second: its link to the API server (its download's
// step, its identity, a cut network), its heartbeat renewal, what the real decide
// (src/agent/steps.ts) is shown, the decision acted on (agent-act.ts), and its status written
// in daemon.ts's order.
import type { Cluster } from "../api/index.js";
import { effectiveTarget } from "../release-decision/view.js";
import { takenBackOf, turnPausedOf } from "../coordinator/turn.js";
import { decide as agentDecide, type Observed as AgentObserved } from "../agent/steps.js";
import { agentObserved, other, statusAfter, type Sim } from "./machine.js";
import { blindTo } from "./blind.js";
import { downloadTick } from "./host.js";
import { act } from "./agent-act.js";
import { approving } from "./operator-copies.js";
import {
  at,
  mkey,
  observeMachine,
  readCluster,
  readMachine,
  V1,
  V2,
  V3,
  type World,
} from "./world-state.js";

/**
 * A machine whose certificate lapsed: the observer is told whether it could join again
 * now, and its agent joins with the bootstrap credential when it can (never-rejoins: never).
 * True while it is still locked out.
 */
function identityTick(w: World, s: Sim): boolean {
  const l = s.lapsed;
  if (l === undefined) return false;
  const joinable = s.powered && s.agentUp && !s.netCut && approving(w);
  if (joinable !== l.joinable) {
    l.joinable = joinable;
    w.history.push({ kind: "join-possible", at: at(w), machine: s.name, possible: joinable });
  }
  if (!joinable || w.mutant === "never-rejoins") return true;
  s.lapsed = undefined;
  w.history.push({ kind: "identity", at: at(w), machine: s.name, event: "rejoined" });
  return false;
}

/** Before the agent's turn: its download's step, its identity; whether the API answers it. */
function linkOf(w: World, s: Sim): boolean {
  downloadTick(w, s);
  // Locked out, the agent's requests all get 401: it reads and writes nothing.
  const lockedOut = identityTick(w, s);
  return !s.netCut && !lockedOut;
}

export function agentTick(w: World, s: Sim): void {
  const reachable = linkOf(w, s);
  if (!s.powered || !s.agentUp) return;
  if (reachable) renewed(w, s);
  const c = blindTo(w.mutant, readCluster(w).obj);
  const o = agentLook(w, s, c, reachable);
  const d = agentDecide(o);
  if (d.action.kind === "drain") {
    // daemon.ts's order for a disruption: the status announcing it first, and the drain only
    // once it is stored (seed 71742: a drain whose status write failed went uncounted).
    s.status = statusAfter(s, d, o, w.now, [V1, V2, V3]);
    if (reachable && writeStatus(w, s)) act(w, s, d.action, c);
    return;
  }
  act(w, s, d.action, c);
  s.status = statusAfter(s, d, o, w.now, [V1, V2, V3]);
  if (reachable) writeStatus(w, s);
}

/** A heartbeat renewal; the first after a Lost mark ends Lost, as the operator counts it. */
function renewed(w: World, s: Sim): void {
  w.leases.set(s.name, w.now);
  // The checker's settings.leases: the other renewals change nothing the rules read.
  if (w.marked.delete(s.name)) w.history.push({ kind: "lease", at: at(w), name: s.name });
}

/** What the agent's decide() is shown this second (its turn read recorded in the history). */
function agentLook(w: World, s: Sim, c: Cluster, reachable: boolean): AgentObserved {
  const staged = s.slots[other(s.running)].release;
  const mine = (c.status?.rebootTurns ?? []).find((t) => t.machine === s.name);
  if (reachable && mine !== undefined) {
    const release = { version: mine.version, digest: mine.digest ?? "" };
    w.history.push({ kind: "turn-read", at: at(w), machine: s.name, bootId: s.bootId, release });
  }
  const o = agentObserved(s, w.now, {
    reachable,
    target: reachable ? effectiveTarget(c) : undefined,
    turn: mine !== undefined && staged !== undefined && mine.digest === staged.digest,
    // The agent's own reading of the record (observe.ts does the same).
    turnTakenBack: reachable ? takenBackOf(c, s.name).turnTakenBack : undefined,
    turnPaused: reachable ? turnPausedOf(c, s.name, staged).turnPaused : undefined,
    mutant: w.mutant,
  });
  if (o.boot.kind === "on-trial" && s.memory.trialSeenAt === undefined) {
    s.memory.trialSeenAt = w.now - s.bootAt;
    o.trialSeenAt = s.memory.trialSeenAt;
  }
  return o;
}

/**
 * The agent writes its status when it changed (its heartbeat is the Lease, above). Compared as
 * text; the stored status's text is known without serializing it again while the stored
 * Machine is the one this agent wrote last (same resourceVersion).
 */
function writeStatus(w: World, s: Sim): boolean {
  const cur = readMachine(w, s.name);
  if (cur === undefined) return false;
  const last = w.written.get(s.name);
  const mine = last?.rv === cur.rv;
  if (mine && last.status === s.status) return true; // statusAfter's same object: unchanged
  const text = JSON.stringify(s.status);
  if (text === (mine ? last.text : JSON.stringify(cur.obj.status))) return true;
  const r = w.api.update(mkey(s.name), { ...cur.obj, status: s.status }, undefined);
  if (r.code === 200) w.written.set(s.name, { rv: r.rv, status: s.status, text });
  if (r.code === 200 || r.code === 504) observeMachine(w, s.name);
  // A 504 may have landed, but the writer cannot know: not a licence to act on.
  return r.code === 200;
}
