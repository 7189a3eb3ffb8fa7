// A simulated machine's state (its slots, bootloader record, power, agent, memory, Node), and
// the pure views of it the real agent code is given and the status it writes.
import type { MachineStatus, ReleaseRef, SlotName } from "../api/index.js";
import type { Slot } from "../bootloader/types.js";
import type { Decision as AgentDecision, Observed as AgentObserved } from "../agent/steps.js";
import { judgeBoot } from "../bootloader/types.js";
import { turnTakenBackSeen } from "../agent/status.js";
import type { Mutant } from "./mutants.js";

export const other = (s: Slot): Slot => (s === "a" ? "b" : "a");
export const rfc = (ms: number): string => new Date(ms).toISOString().replace(/\.\d{3}Z$/, "Z");

export interface Sim {
  name: string;
  leader: boolean;
  powered: boolean;
  agentUp: boolean;
  netCut: boolean;
  /** Seconds until it is up again after a reboot (0: up). */
  downFor: number;
  bootSeq: number;
  bootId: string;
  bootAt: number;
  /** The machine's wall clock minus the true one (a clock jump), ms. */
  skew: number;
  running: Slot;
  slots: Record<
    Slot,
    {
      release: ReleaseRef | undefined;
      bytes: string | undefined;
      state: "empty" | "writing" | "staged";
    }
  >;
  boot: { defaultSlot: Slot; armed: Slot | null; started: Slot | null };
  download: { release: ReleaseRef; slot: Slot; left: number } | undefined;
  /** What the agent keeps on disk (its memory): survives kills and power cuts. */
  memory: {
    failed: string[];
    armed: { slot: Slot; bootId: string; shown: boolean } | undefined;
    drained: string | undefined;
    trialSeenAt: number | undefined;
  };
  /**
   * Its client certificate lapsed (a renewal pending until it expired): nothing it sends is
   * accepted until it joins again with the bootstrap credential. `joinable`: what the
   * observer was last told of whether it can.
   */
  lapsed: { joinable: boolean } | undefined;
  /** The Node as the kubelet posts it. */
  node: { bootId: string; heartbeatAt: number; postsIn: number } | undefined;
  status: MachineStatus;
}

/** What the agent's decide() is shown: the machine as its daemon would gather it. */
export function agentObserved(
  s: Sim,
  now: number,
  look: {
    reachable: boolean;
    target: ReleaseRef | undefined;
    turn: boolean;
    /** The grantedAt of this machine's record in status.takenBackTurns, if any. */
    turnTakenBack: string | undefined;
    /** Why the held turn is paused before its drain (its record's drainPause), if it is. */
    turnPaused?: string | undefined;
    mutant: Mutant | undefined;
  },
): AgentObserved {
  const staged = s.slots[other(s.running)];
  const running = s.slots[s.running].release;
  return {
    now: now - s.bootAt,
    apiReachable: look.reachable,
    boot: judgeBoot(s.boot, s.running),
    running: { slot: s.running, state: "staged", ...(running ? { release: running } : {}) },
    other: {
      slot: other(s.running),
      state: staged.state,
      ...(staged.release ? { release: staged.release } : {}),
    },
    target: look.target,
    policy: "Auto",
    approval: undefined,
    turn: look.turn,
    download: s.download?.release,
    downloadIdleSince: undefined,
    downloadFailedAt: undefined,
    failedDigests: s.memory.failed,
    drainedDigest: s.memory.drained,
    ...(look.turnTakenBack !== undefined ? { turnTakenBack: look.turnTakenBack } : {}),
    ...(look.turnPaused !== undefined ? { turnPaused: look.turnPaused } : {}),
    nodeName: s.name,
    node: nodeSeen(s, look.mutant),
    nodeUnread: look.reachable ? undefined : "network cut",
    bootStartedAt: s.bootAt + s.skew,
    trialSeenAt: s.memory.trialSeenAt,
    bootId: s.bootId,
    armedTrial: s.memory.armed,
  };
}

/** The Node as the agent reads it; the bootid mutant shows this boot's id whatever it says. */
function nodeSeen(s: Sim, mutant: Mutant | undefined): AgentObserved["node"] {
  if (s.node === undefined) return undefined;
  return {
    bootId: mutant === "bootid" ? s.bootId : s.node.bootId,
    ready: { status: "True", heartbeatAt: s.node.heartbeatAt },
  };
}

/**
 * What statusAfter reads besides the status before (s.status, replaced and never changed in
 * place), by reference: the releases are the run's constant objects, the failed list a new
 * array on every change.
 */
function inputsOf(s: Sim, d: AgentDecision, o: AgentObserved): readonly unknown[] {
  const staged = s.slots[other(s.running)];
  const running = s.slots[s.running].release;
  return [
    turnTakenBackSeen(s.status, o, d)?.grantedAt,
    d.step,
    d.stage,
    d.wantsTurn,
    s.running,
    running,
    staged.state,
    staged.release,
    s.memory.failed,
  ];
}
const lastStatus = new WeakMap<Sim, { inputs: readonly unknown[]; out: MachineStatus }>();

/**
 * The status the agent writes after a decision (times kept while their subject is unchanged).
 * The same inputs as the last call (most machines, most seconds) give the same status: the
 * last one is returned, the same object, which writeStatus then skips without serializing.
 */
export function statusAfter(
  s: Sim,
  d: AgentDecision,
  o: AgentObserved,
  now: number,
  releases: readonly ReleaseRef[],
): MachineStatus {
  const inputs = inputsOf(s, d, o);
  const last = lastStatus.get(s);
  if (last?.out === s.status && inputs.every((x, i) => x === last.inputs[i])) return last.out;
  const out = freshStatus(s, d, o, now, releases);
  lastStatus.set(s, { inputs, out });
  return out;
}

function freshStatus(
  s: Sim,
  d: AgentDecision,
  o: AgentObserved,
  now: number,
  releases: readonly ReleaseRef[],
): MachineStatus {
  const slot = other(s.running);
  const staged = s.slots[slot];
  const prev = s.status;
  // Built anew, never changed in place (the simulated API server keeps what it is given).
  const { updateStage: _stage, staged: _staged, turnRequest: _request, ...kept } = prev;
  const st: MachineStatus = {
    ...kept,
    version: s.slots[s.running].release?.version,
    digest: s.slots[s.running].release?.digest,
    step: d.step,
    failedReleases: s.memory.failed.map((dg) => ({
      version: releases.find((r) => r.digest === dg)?.version ?? "?",
      digest: dg,
      at: prev.failedReleases?.find((f) => f.digest === dg)?.at ?? rfc(now),
      reason: "TrialFailed",
    })),
  };
  if (d.stage !== undefined) st.updateStage = d.stage;
  // The agent's own rule (status.ts): the word that a turn taken back was not acted on.
  const seen = turnTakenBackSeen(prev, o, d);
  if (seen !== undefined) st.turnTakenBack = seen;
  else delete st.turnTakenBack;
  if (staged.state === "staged" && staged.release !== undefined) {
    const same = prev.staged?.digest === staged.release.digest && prev.staged.slot === slot;
    st.staged = {
      ...staged.release,
      slot: slot as SlotName,
      at: same ? prev.staged!.at : rfc(now),
    };
  }
  if (d.wantsTurn && staged.release !== undefined) {
    st.turnRequest = { ...staged.release, at: prev.turnRequest?.at ?? rfc(now) };
  }
  return st;
}
