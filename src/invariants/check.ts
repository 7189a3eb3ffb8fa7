// The invariant checker: reads a history (history.ts) once, in order, and reports every instant
// where one of the fleet's safety rules was broken. Pure and deterministic: the simulator
// (src/sim), and later the lab's observer and a real-process torture run, feed it what they saw.
//
// What each rule judges, and on whose evidence (docs/simulation.md, "The invariants"):
//   budget          at each disruption liken begins (a drain, or an agent's reboot with none;
//                   a disruption lasts until the machine rejoined and holds no turn),
//                   the machines in a disruption plus those marked Lost exceed the Cluster's
//                   maxUnavailable. A power cut is no act of liken's: it is counted once the
//                   operator marks it Lost, and is never itself a violation. Lost lasts from
//                   the mark to the first renewal after it where the history records them
//                   (the simulator), as the operator counts it; else while the step says so.
//   two-leaders     a leader's disruption begins while another leader is disrupted or Lost.
//   reboot-without-turn   an agent's reboot with no turn record read in this boot, or with its
//                   arm (this boot) before the read.
//   boot-unverified-slot  a trial boot into a slot whose arm had no matching read-back of that
//                   slot's last write before it.
//   failed-release-retried  an arm of a release this machine failed, with no say-so since.
//   grant-in-grace  a turn record that first appears less than the grace after its granting
//                   copy started or woke.
//   promote-without-rejoin  a promotion whose boot is not the machine's current one, or with no
//                   rejoin naming this boot's bootId since it began.
//   ended-unexplained  at the end, a machine neither on the target nor with a stated reason
//                   (the target in failedReleases, step Failed or Lost, or its drain skipped).
//   grant-withdrawn, below-taken, revert-dropped  the release rules (release.ts).
//   lost-lapsed     a machine Lost only because its certificate lapsed while it could still
//                   rejoin (identity.ts).
import type { Cluster, Machine, SlotName } from "../api/index.js";
import { effectiveTarget } from "../release-decision/view.js";
import { parseBudget } from "../operator/turns/budget.js";
import type { CheckSettings, History, Observation, Rel, Violation } from "./history.js";
import { releaseViolations } from "./release.js";
import { LapseRule } from "./identity.js";

interface Arm {
  at: number;
  bootId: string;
  slot: SlotName;
  release: Rel;
  /** Whether a matched read-back of this slot's last write came before the arm. */
  verified: boolean;
}

interface MachineState {
  machine: Machine | undefined;
  /**
   * Since when liken has it in a disruption (drain or reboot), until it rejoins and holds no
   * turn: the operator counts a machine against the budget for as long as its turn is held,
   * so a second reboot within one turn (a fallback after a retarget) is the same disruption.
   */
  disrupted: number | undefined;
  /** Rejoined within its disruption; the disruption ends once it holds no turn either. */
  rejoinedInTurn: boolean;
  /** Since when the operator's Lost mark stands with no renewal after it (settings.leases). */
  lostSince: number | undefined;
  bootId: string | undefined;
  /** When the current boot began (its boot event). */
  bootAt: number;
  /** The turn reads of the current boot (their times). */
  turnReads: number[];
  arms: Arm[];
  /** Per slot: the digest written last and whether a matched read-back followed. */
  slots: Map<SlotName, { digest: string; matched: boolean }>;
  /** Failed releases (digest) not since allowed again by a person. */
  failed: Set<string>;
  rejoined: Set<string>;
}

function fresh(): MachineState {
  return {
    machine: undefined,
    disrupted: undefined,
    rejoinedInTurn: false,
    lostSince: undefined,
    bootId: undefined,
    bootAt: Number.NEGATIVE_INFINITY,
    turnReads: [],
    arms: [],
    slots: new Map(),
    failed: new Set(),
    rejoined: new Set(),
  };
}

const turnKey = (t: { machine: string; grantedAt: string; grantedBy: string }): string =>
  `${t.machine}\u0000${t.grantedAt}\u0000${t.grantedBy}`;

interface Ctx {
  s: CheckSettings;
  out: Violation[];
  machines: Map<string, MachineState>;
  starts: Map<string, number>;
  cluster: Cluster | undefined;
  turns: Set<string>;
  lapses: LapseRule;
}

export function checkHistory(history: History, s: CheckSettings): Violation[] {
  const c: Ctx = {
    s,
    out: [],
    machines: new Map(),
    starts: new Map(),
    cluster: undefined,
    turns: new Set(),
    lapses: new LapseRule(),
  };
  for (const o of history) observe(c, o);
  return c.out;
}

/** Lost as the operator counts it: from the mark to the next renewal (or by the step). */
function isLost(c: Ctx, m: MachineState): boolean {
  return c.s.leases === true ? m.lostSince !== undefined : stepLost(m.machine);
}

const isDown = (c: Ctx, m: MachineState): boolean => m.disrupted !== undefined || isLost(c, m);

function stateOf(c: Ctx, name: string): MachineState {
  let m = c.machines.get(name);
  if (m === undefined) c.machines.set(name, (m = fresh()));
  return m;
}

const stepLost = (m: Machine | undefined): boolean => m?.status?.step === "Lost";
const isLeader = (m: MachineState): boolean => m.machine?.spec.role === "Leader";

const ACTS = [
  "turn-read",
  "drain-start",
  "slot-write",
  "read-back",
  "arm",
  "reboot",
  "boot",
  "rejoin",
  "promote",
  "trial-failed",
] as const;
type Act = Of<(typeof ACTS)[number]>;
type Ident = Of<"identity"> | Of<"join-possible">;
type Record_ = Exclude<Observation, Act | Ident>;
const isAct = (o: Observation): o is Act => (ACTS as readonly string[]).includes(o.kind);

function observe(c: Ctx, o: Observation): void {
  if (o.kind === "identity" || o.kind === "join-possible") onIdentity(c, o);
  else if (isAct(o)) observeAct(c, o);
  else observeRecord(c, o);
}

/** What was read from the API server, and what people and operator copies did. */
function observeRecord(c: Ctx, o: Record_): void {
  switch (o.kind) {
    case "cluster":
      return onCluster(c, o);
    case "machine":
      return onMachine(c, o);

    case "machine-deleted": {
      // The API object is gone, the machine is not: a disruption under way goes on until it
      // rejoins (seed 2456: a Machine deleted and created again mid-turn, then a fallback
      // reboot within the same turn).
      stateOf(c, o.name).machine = undefined;
      return;
    }
    case "lease":
      stateOf(c, o.name).lostSince = undefined; // the heartbeat is back: Lost ends here
      return;
    case "node":
    case "node-deleted":
      // Recorded for the reader of a violation; the rules judge liken's acts and records.
      return;
    case "operator-start":
      c.starts.set(o.copy, o.at);
      return;
    case "say-so":
      for (const [name, m] of c.machines) {
        if (o.machines.length === 0 || o.machines.includes(name)) m.failed.delete(o.digest);
      }
      return;
    case "end":
      for (const m of c.machines.values()) c.out.push(...c.lapses.judge(m.machine, o.at));
      c.out.push(...unexplained(o.at, c.cluster, c.machines));
      return;
    default: {
      const never: never = o;
      throw new Error(`unknown observation ${JSON.stringify(never)}`);
    }
  }
}

function onMachine(c: Ctx, o: Of<"machine">): void {
  const m = stateOf(c, o.machine.metadata.name);
  // A mark: the step becomes Lost. The same step read again is no new mark.
  if (stepLost(o.machine) && !stepLost(m.machine)) m.lostSince ??= o.at;
  m.machine = o.machine;
  c.out.push(...c.lapses.judge(o.machine, o.at));
}

/** A certificate lapsed or renewed, and whether a lapsed machine could join again (identity.ts). */
function onIdentity(c: Ctx, o: Ident): void {
  if (o.kind === "join-possible") c.lapses.possible(o.machine, o.at, o.possible);
  else if (o.event === "lapsed") c.lapses.lapsed(o.machine, o.at);
  else c.lapses.rejoined(o.machine);
}

/** What a machine (its agent, its bootloader, its power) did. */
function observeAct(c: Ctx, o: Act): void {
  switch (o.kind) {
    case "turn-read": {
      const m = stateOf(c, o.machine);
      if (m.bootId === undefined || m.bootId === o.bootId) m.turnReads.push(o.at);
      return;
    }
    case "drain-start":
      return disruptionBegins(c, o);
    case "slot-write":
      stateOf(c, o.machine).slots.set(o.slot, { digest: o.digest, matched: false });
      return;
    case "read-back": {
      const slot = stateOf(c, o.machine).slots.get(o.slot);
      if (slot !== undefined && slot.digest === o.digest) slot.matched = o.matched;
      return;
    }
    case "arm":
      return onArm(c, o);
    case "reboot":
      return onReboot(c, o);
    case "boot":
      return onBoot(c, o);
    case "rejoin":
      return onRejoin(c, o);
    case "promote":
      return onPromote(c, o);
    case "trial-failed":
      stateOf(c, o.machine).failed.add(o.release.digest);
      return;
    default: {
      const never: never = o;
      throw new Error(`unknown act ${JSON.stringify(never)}`);
    }
  }
}

type Of<K extends Observation["kind"]> = Extract<Observation, { kind: K }>;

function onCluster(c: Ctx, o: Of<"cluster">): void {
  const added = (o.cluster.status?.rebootTurns ?? []).filter((t) => !c.turns.has(turnKey(t)));
  c.out.push(...releaseViolations(c.cluster, o.cluster, added, o.at));
  for (const t of added) {
    const start = c.starts.get(t.grantedBy);
    if (start !== undefined && o.at - start < c.s.startGraceMs) {
      c.out.push({
        rule: "grant-in-grace",
        at: o.at,
        machine: t.machine,
        message: `${t.grantedBy} granted ${t.machine} a turn ${o.at - start} ms after it started or woke (grace ${c.s.startGraceMs} ms)`,
      });
    }
  }
  c.turns = new Set((o.cluster.status?.rebootTurns ?? []).map(turnKey));
  c.cluster = o.cluster;
  for (const [name, m] of c.machines) {
    if (!m.rejoinedInTurn || holdsTurn(c, name)) continue;
    m.disrupted = undefined;
    m.rejoinedInTurn = false;
  }
}

const holdsTurn = (c: Ctx, machine: string): boolean =>
  (c.cluster?.status?.rebootTurns ?? []).some((t) => t.machine === machine);

function disruptionBegins(c: Ctx, o: { at: number; machine: string }): void {
  const me = stateOf(c, o.machine);
  if (me.disrupted !== undefined) {
    me.rejoinedInTurn = false; // down again within the same disruption (its turn still held)
    return;
  }
  me.disrupted = o.at;
  const present = [...c.machines.values()].filter((m) => m.machine !== undefined);
  const down = [...c.machines.entries()].filter(([, m]) => isDown(c, m));
  const budget = parseBudget(c.cluster?.spec.disruption?.maxUnavailable, present.length).budget;
  if (down.length > budget) {
    c.out.push({
      rule: "budget",
      at: o.at,
      machine: o.machine,
      message: `${down.length} machines down (${names(down)}), the budget allows ${budget}`,
    });
  }
  if (!isLeader(me)) return;
  const others = down.filter(([n, m]) => n !== o.machine && isLeader(m));
  if (others.length > 0) {
    c.out.push({
      rule: "two-leaders",
      at: o.at,
      machine: o.machine,
      message: `leader ${o.machine} went down while leader ${names(others)} was down`,
    });
  }
}

/** Back in service; a machine still holding its turn stays down until the turn is gone. */
function onRejoin(c: Ctx, o: Of<"rejoin">): void {
  const m = stateOf(c, o.machine);
  m.rejoined.add(o.bootId);
  if (holdsTurn(c, o.machine)) m.rejoinedInTurn = m.disrupted !== undefined;
  else m.disrupted = undefined;
}

function onArm(c: Ctx, o: Of<"arm">): void {
  const m = stateOf(c, o.machine);
  const slot = m.slots.get(o.slot);
  const verified = slot !== undefined && slot.matched && slot.digest === o.release.digest;
  m.arms.push({ at: o.at, bootId: o.bootId, slot: o.slot, release: o.release, verified });
  if (m.failed.has(o.release.digest)) {
    c.out.push({
      rule: "failed-release-retried",
      at: o.at,
      machine: o.machine,
      message: `${o.machine} armed ${o.release.version} (${o.release.digest}) again after it failed there, with no say-so`,
    });
  }
}

function onReboot(c: Ctx, o: Of<"reboot">): void {
  if (o.cause !== "agent") return;
  const m = stateOf(c, o.machine);
  disruptionBegins(c, o);
  const read = m.turnReads.find((t) => t <= o.at);
  const arm = m.arms.findLast((a) => a.bootId === o.bootId);
  if (read === undefined) {
    c.out.push({
      rule: "reboot-without-turn",
      at: o.at,
      machine: o.machine,
      message: `${o.machine} rebooted (boot ${o.bootId}) with no turn record read in this boot`,
    });
  } else if (arm !== undefined && arm.at < read) {
    c.out.push({
      rule: "reboot-without-turn",
      at: o.at,
      machine: o.machine,
      message: `${o.machine} armed ${arm.slot} before it read its turn record (boot ${o.bootId})`,
    });
  }
}

function onBoot(c: Ctx, o: Of<"boot">): void {
  const m = stateOf(c, o.machine);
  if (o.trial) {
    const arm = m.arms.findLast((a) => a.slot === o.slot);
    if (arm === undefined || !arm.verified) {
      c.out.push({
        rule: "boot-unverified-slot",
        at: o.at,
        machine: o.machine,
        message: `${o.machine} booted slot ${o.slot} as a trial with no matching read-back before its arm`,
      });
    }
  }
  m.bootId = o.bootId;
  m.bootAt = o.at;
  m.turnReads = [];
}

function onPromote(c: Ctx, o: Of<"promote">): void {
  const m = stateOf(c, o.machine);
  if (m.bootId === o.bootId && m.rejoined.has(o.bootId)) return;
  c.out.push({
    rule: "promote-without-rejoin",
    at: o.at,
    machine: o.machine,
    message: `${o.machine} promoted ${o.release.version} in boot ${o.bootId} with no rejoin naming this boot (current boot ${m.bootId ?? "unknown"})`,
  });
}

function names(list: readonly (readonly [string, MachineState])[]): string {
  return list.map(([n]) => n).join(", ");
}

/**
 * Whether a machine's end is explained: on the target, or a stated reason it is not (its own:
 * the target failed there, step Failed or Lost, its drain skipped; or the Cluster's: the
 * rollout held, Progressing False with a reason, e.g. ReleaseFailed or RolloutStalled).
 */
function explained(name: string, m: Machine, target: Rel, why: EndWhy): boolean {
  const st = m.status ?? {};
  if (why.held) return true;
  if (st.version === target.version && st.digest === target.digest) return true;
  if ((st.failedReleases ?? []).some((f) => f.digest === target.digest)) return true;
  return st.step === "Failed" || st.step === "Lost" || why.skipped.has(name);
}

interface EndWhy {
  skipped: ReadonlySet<string>;
  held: boolean;
}

function unexplained(
  at: number,
  cluster: Cluster | undefined,
  machines: ReadonlyMap<string, MachineState>,
): Violation[] {
  const target = effectiveTarget(cluster);
  if (target === undefined) return [];
  const why: EndWhy = {
    skipped: new Set((cluster?.status?.drainSkipped ?? []).map((d) => d.machine)),
    held: (cluster?.status?.conditions ?? []).some(
      (k) => k.type === "Progressing" && k.status === "False",
    ),
  };
  const out: Violation[] = [];
  for (const [name, { machine: m }] of machines) {
    if (m === undefined || explained(name, m, target, why)) continue;
    const st = m.status;
    out.push({
      rule: "ended-unexplained",
      at,
      machine: name,
      message: `${name} ended on ${st?.version ?? "nothing"} (step ${st?.step ?? "none"}), not the target ${target.version}, with no stated reason`,
    });
  }
  return out;
}
