// What a simulated agent's decision does to its machine (act.ts and the agent's memory,
// modelled): downloads, drains through the real planner, the slot read back before a trial is
// armed, reboots, and the trial's end or undoing in the bootloader's record. Each step is
// recorded in the history as the observer sees it.
import type { Cluster, ReleaseRef, SlotName } from "../api/index.js";
import type { Slot } from "../bootloader/types.js";
import { afterSlotCheck, beforeDrain, type Decision as AgentDecision } from "../agent/steps.js";
import { turnLookOf } from "../agent/step-verdicts.js";
import { planDrain } from "../drain/plan.js";
import { rfc, type Sim } from "./machine.js";
import { reboot } from "./host.js";
import { at, readCluster, type World } from "./world-state.js";

type Action = AgentDecision["action"];
const TRIAL_ACTIONS = [
  "disarm",
  "promote",
  "fall-back-report",
  "not-taken-report",
  "not-armed-report",
] as const;
type TrialAction = Extract<Action, { kind: (typeof TRIAL_ACTIONS)[number] }>;
const isTrialAction = (a: Action): a is TrialAction =>
  (TRIAL_ACTIONS as readonly string[]).includes(a.kind);

export function act(w: World, s: Sim, a: Action, c: Cluster): void {
  if (isTrialAction(a)) return actOnTrial(w, s, a);
  switch (a.kind) {
    case "wait":
    case "check-health":
    case "install-boot-files":
      return;
    case "withdraw":
      s.slots[a.slot] = { release: undefined, bytes: undefined, state: "empty" };
      return;
    case "cancel-download":
      s.download = undefined;
      return;
    case "download":
      if (s.download === undefined) {
        s.download = { release: a.release, slot: a.slot, left: w.rng.int(3, 30) };
        s.slots[a.slot] = { release: a.release, bytes: undefined, state: "writing" };
      }
      return;
    case "request-turn":
      return;
    case "drain":
      return drain(w, s, a.release);
    case "check-and-reboot":
      return checkAndReboot(w, s, a.slot, a.release, c);
    case "reboot":
      return reboot(w, s);
    case "release-turn":
      return releaseTurn(w, s);
    default: {
      const never: never = a;
      throw new Error(`unknown action ${JSON.stringify(never)}`);
    }
  }
}
/** act.ts's drain: the turn read again, fresh, then the real planner on an empty node. */
function drain(w: World, s: Sim, release: ReleaseRef): void {
  // act.ts's order: the turn read again, fresh, right before the drain.
  const turn = (readCluster(w).obj.status?.rebootTurns ?? []).find(
    (t) => t.machine === s.name && t.digest === release.digest,
  );
  // The simulated drain is done the moment it begins: none was begun before this one.
  if (beforeDrain(turnLookOf(turn), false, false).kind !== "drain") return;
  // The real planner on this node's (empty) pod list: nothing to evict, done at once.
  const plan = planDrain(s.name, { pods: [], claims: [] }, {});
  if (plan.waves.some((p) => p.pods.length > 0)) return;
  w.history.push({
    kind: "drain-start",
    at: at(w),
    machine: s.name,
    bootId: s.bootId,
    release,
  });
  s.memory.drained = release.digest;
}

/**
 * The turn given back (uncordoned): back in service only with its Node on this boot, so the
 * checker keeps a machine that gives its turn back before that counted as down.
 */
function releaseTurn(w: World, s: Sim): void {
  s.memory.drained = undefined;
  if (s.node?.bootId === s.bootId) {
    w.history.push({ kind: "rejoin", at: at(w), machine: s.name, bootId: s.bootId });
  }
}

/** The actions that end or undo a trial (the bootloader's record and the agent's memory). */
function actOnTrial(w: World, s: Sim, a: TrialAction): void {
  switch (a.kind) {
    case "disarm":
      s.boot.armed = null;
      s.memory.armed = undefined;
      return;
    case "promote":
      w.history.push({
        kind: "promote",
        at: at(w),
        machine: s.name,
        bootId: s.bootId,
        release: s.slots[a.slot].release!,
      });
      s.boot = { defaultSlot: a.slot, armed: null, started: null };
      s.memory.armed = undefined;
      s.memory.drained = undefined;
      s.memory.trialSeenAt = undefined;
      return;
    case "fall-back-report":
    case "not-taken-report":
      return trialFailed(w, s, a.slot);
    case "not-armed-report":
      s.boot.armed = null;
      s.boot.started = null;
      s.memory.armed = undefined;
      return;
    default: {
      const never: never = a;
      throw new Error(`unknown action ${JSON.stringify(never)}`);
    }
  }
}

/** A trial that fell back or was not taken, reported: its release failed on this machine. */
function trialFailed(w: World, s: Sim, slot: Slot): void {
  const rel = s.slots[slot].release;
  if (rel !== undefined) {
    s.memory.failed = [...new Set([...s.memory.failed, rel.digest])];
    w.history.push({ kind: "trial-failed", at: at(w), machine: s.name, release: rel });
    const lastTrial = {
      ...rel,
      slot: slot as SlotName,
      result: "Failed",
      at: rfc(w.now),
      bootId: s.bootId,
      reason: "FellBack",
    } as never;
    s.status = { ...s.status, lastTrial }; // a new object: the old one may be stored
  }
  // As memory-verdicts.ts (fellBack, notTaken): the drain is remembered until the turn is given
  // back, which the agent does once this boot rejoined (steps.ts giveBack).
  s.boot.started = null;
  s.memory.armed = undefined;
  s.memory.trialSeenAt = undefined;
}

/** act.ts's order: read the slot back, read the turn again, then arm, then reboot. */
function checkAndReboot(w: World, s: Sim, slot: Slot, release: ReleaseRef, c: Cluster): void {
  const { mutant, history } = w;
  const armIt = (): void => {
    s.memory.armed = { slot, bootId: s.bootId, shown: true };
    s.boot.armed = slot;
    history.push({
      kind: "arm",
      at: at(w),
      machine: s.name,
      bootId: s.bootId,
      slot: slot as SlotName,
      release,
    });
  };
  if (mutant === "arm-first") armIt();
  const matched = s.slots[slot].bytes === release.digest;
  history.push({
    kind: "read-back",
    at: at(w),
    machine: s.name,
    slot: slot as SlotName,
    digest: release.digest,
    matched,
  });
  const turn = (readCluster(w).obj.status?.rebootTurns ?? c.status?.rebootTurns ?? []).find(
    (t) => t.machine === s.name && t.digest === release.digest,
  );
  const v = afterSlotCheck(
    matched ? { kind: "matched" } : { kind: "mismatch", problems: ["digest differs"] },
    turnLookOf(turn),
    false,
    slot,
    release,
  );
  switch (v.kind) {
    case "arm":
      if (mutant !== "arm-first") armIt();
      return reboot(w, s);
    case "skip-trial":
      s.memory.failed = [...new Set([...s.memory.failed, release.digest])];
      history.push({ kind: "trial-failed", at: at(w), machine: s.name, release });
      return reboot(w, s);
    case "retry":
    case "stand-down":
      return;
    default: {
      const never: never = v;
      throw new Error(`unknown verdict ${JSON.stringify(never)}`);
    }
  }
}
