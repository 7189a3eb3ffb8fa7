// What a machine's own records say, read after the run: the firmware model's boot record
// (which slot, trial or not, when) and the agent's log (its boot id, the phases it began and
// ended). Turned into the checker's acts. The acts from the agent's log are the agent's word:
// a read-back is the agent saying it verified; the boots, the power cuts and the turns are
// not (they come from the supervisor, this runner and the API server).
import type { SlotName } from "../api/index.js";
import type { Observation, Rel } from "../invariants/index.js";
import type { BootRecordEntry } from "../lab/machine.js";
import { BOOT_ID_LOG_MESSAGE } from "../agent/observe.js";

/** One line of the agent's JSON log (pino: time in ms since the epoch). */
export interface AgentLogLine {
  time: number;
  msg: string;
  step?: string;
  bootId?: string;
  version?: string;
  slot?: string;
}

export function parseAgentLog(text: string): AgentLogLine[] {
  const out: AgentLogLine[] = [];
  for (const line of text.split("\n")) {
    if (!line.startsWith("{")) continue;
    try {
      const o = JSON.parse(line) as Partial<AgentLogLine>;
      if (typeof o.time === "number" && typeof o.msg === "string") out.push(o as AgentLogLine);
    } catch {
      // a line cut by a SIGKILL or a power cut: nothing was said
    }
  }
  return out;
}

/** The boot id of each boot: the agent's first "this boot" line between it and the next boot. */
export function bootIds(
  machine: string,
  boots: readonly BootRecordEntry[],
  log: readonly AgentLogLine[],
): string[] {
  return boots.map((b, i) => {
    const end = boots[i + 1]?.at ?? Number.POSITIVE_INFINITY;
    const said = log.find(
      (l) => l.msg === BOOT_ID_LOG_MESSAGE && l.bootId && l.time >= b.at && l.time < end,
    );
    return said?.bootId ?? `${machine}-boot-${b.n}-${b.outcome}`;
  });
}

const isSlot = (s: string | undefined): s is SlotName => s === "a" || s === "b";

/**
 * The acts of one machine: boots from the supervisor's record, the rest from its agent's log;
 * `digestOf` maps a version to the digest the catalog gives it.
 */
export function machineActs(
  machine: string,
  boots: readonly BootRecordEntry[],
  log: readonly AgentLogLine[],
  digestOf: (version: string) => string,
): Observation[] {
  const out: Observation[] = [];
  const ids = bootIds(machine, boots, log);
  boots.forEach((b, i) =>
    out.push({ kind: "boot", at: b.at, machine, bootId: ids[i]!, slot: b.slot, trial: b.trial }),
  );
  const bootAt = (t: number): string => {
    let id = ids[0] ?? `${machine}-before-boot`;
    boots.forEach((b, i) => {
      if (b.at <= t) id = ids[i]!;
    });
    return id;
  };
  let staged: Staged | undefined;
  for (const l of log) {
    if (l.msg === "download staged and verified" && isSlot(l.slot) && l.version) {
      staged = { slot: l.slot, release: { version: l.version, digest: digestOf(l.version) } };
      const { slot, release } = staged;
      out.push({ kind: "slot-write", at: l.time - 1, machine, slot, digest: release.digest });
      out.push({
        kind: "read-back",
        at: l.time,
        machine,
        slot,
        digest: release.digest,
        matched: true,
      });
      continue;
    }
    const act = actOf(l, machine, bootAt(l.time), staged);
    if (act !== undefined) out.push(act);
  }
  return out;
}

interface Staged {
  slot: SlotName;
  release: Rel;
}

/** The act one log line tells of, in the boot it was said in (the staged release's). */
function actOf(
  l: AgentLogLine,
  machine: string,
  bootId: string,
  staged: Staged | undefined,
): Observation | undefined {
  const at = l.time;
  if (l.msg === "rebooting") return { kind: "reboot", at, machine, bootId, cause: "agent" };
  if (staged === undefined) return undefined;
  const { slot, release } = staged;
  const phase = `${l.step ?? ""}/${l.msg}`;
  switch (phase) {
    case "check slot/end":
    case "check slot/failed": {
      const matched = l.msg === "end";
      return { kind: "read-back", at, machine, slot, digest: release.digest, matched };
    }
    case "drain/begin":
      return { kind: "drain-start", at, machine, bootId, release };
    // The arm at its begin: the boot-once entry may be on disk before the agent says it ended
    // (a power cut mid-arm then boots the trial with no "end" in the log; seed 28), and a
    // read-back must come before the arm begins.
    case "arm trial/begin":
      return { kind: "arm", at, machine, bootId, slot, release };
    case "promote/end":
      return { kind: "promote", at, machine, bootId, release };
    default:
      return undefined;
  }
}
