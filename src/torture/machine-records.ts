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
  let staged: { slot: SlotName; release: Rel } | undefined;
  for (const l of log) {
    const bootId = bootAt(l.time);
    const at = l.time;
    if (l.msg === "download staged and verified" && isSlot(l.slot) && l.version) {
      const release = { version: l.version, digest: digestOf(l.version) };
      staged = { slot: l.slot, release };
      out.push({ kind: "slot-write", at: at - 1, machine, slot: l.slot, digest: release.digest });
      out.push({
        kind: "read-back",
        at,
        machine,
        slot: l.slot,
        digest: release.digest,
        matched: true,
      });
    } else if (l.step === "check slot" && staged && (l.msg === "end" || l.msg === "failed")) {
      out.push({
        kind: "read-back",
        at,
        machine,
        slot: staged.slot,
        digest: staged.release.digest,
        matched: l.msg === "end",
      });
    } else if (l.step === "drain" && l.msg === "begin" && staged) {
      out.push({ kind: "drain-start", at, machine, bootId, release: staged.release });
    } else if (l.step === "arm trial" && l.msg === "end" && staged) {
      out.push({ kind: "arm", at, machine, bootId, slot: staged.slot, release: staged.release });
    } else if (l.msg === "rebooting") {
      out.push({ kind: "reboot", at, machine, bootId, cause: "agent" });
    } else if (l.step === "promote" && l.msg === "end" && staged) {
      out.push({ kind: "promote", at, machine, bootId, release: staged.release });
    }
  }
  return out;
}
