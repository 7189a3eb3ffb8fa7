// Reading the machine guest's boots off its serial console (pure: text in, boots out).
// A boot begins where OVMF starts a boot option; its slot and whether it is a trial come from
// what the bootloader and the kernel print (GRUB's liken-grub line, the kernel's command line
// with liken.slot=), its version from the guest's LIKEN-BOOT line, the release its initrd was
// built for from the LIKEN-INITRD line, and the agent's READY=1
// from systemd's "Started liken-agent.service" (a Type=notify unit is started at READY=1).
import {
  GUEST_AGENT_READY,
  GUEST_BOOT_LINE,
  GUEST_INITRD_LINE,
} from "../../testbed/machine/contract.js";
import type { Slot } from "../../src/bootloader/types.js";
import type { BootLine } from "./scenarios.js";

/** One line of the console and when it arrived (ms since the scenario started). */
export interface ConsoleLine {
  ms: number;
  text: string;
}

export interface ConsoleBoot {
  line: BootLine;
  atMs: number;
  readyMs?: number;
  /** The release the initrd that ran was built for (its LIKEN-INITRD line), and that line. */
  initrd?: { version: string; line: string };
  /** The console's lines of this boot that name liken-agent (systemd starting it...). */
  agentLines: string[];
  /** The kernel panicked in this boot. */
  panicked: boolean;
  /** Its line is final: the initrd spoke, or the boot ended (a panic, a later boot). */
  settled: boolean;
}

const BOOT_START = /BdsDxe: starting Boot/;
const GRUB_BOOTING = /liken-grub: booting (trial-)?([ab])\b/;
const CMDLINE_SLOT = /Command line:.*\bliken\.slot=([ab])\b/;
const CMDLINE_TRIAL = /Command line:.*\bliken\.trial=1\b/;
const GUEST_BOOT = GUEST_BOOT_LINE;
const AGENT_READY = GUEST_AGENT_READY;
const AGENT_LINE = /liken-agent/;
const PANIC = /Kernel panic/;
/**
 * What serial.ts's cleaning leaves of an escape sequence cut across two reads of the socket
 * (seen: "Started [0;1;39mliken-agent.service").
 */
// eslint-disable-next-line no-control-regex
const ESCAPE_LEFTOVER = /\x1b|\[[0-9;?]*[A-Za-z]/g;

/**
 * The boots in `lines`. A boot that dies before its OS says its version (a panic at start)
 * gets `versionOf(slot)`, what the host knows that slot holds, marked with a "?" if unknown.
 */
export function parseBoots(
  lines: readonly ConsoleLine[],
  versionOf: (slot: Slot, bootIndex: number) => string | undefined,
): ConsoleBoot[] {
  const boots: (ConsoleBoot & { slotSeen: boolean; versionSeen: boolean })[] = [];
  for (const l of lines) {
    // The console is UTF-8 (systemd's "…"); serial.ts keeps it as latin1.
    const t = Buffer.from(l.text.replace(ESCAPE_LEFTOVER, ""), "latin1").toString("utf8");
    if (BOOT_START.test(t)) {
      boots.push({
        line: { slot: "a", version: "?", trial: false },
        atMs: l.ms,
        agentLines: [],
        panicked: false,
        settled: false,
        slotSeen: false,
        versionSeen: false,
      });
      continue;
    }
    const b = boots.at(-1);
    if (b === undefined) continue;
    let m: RegExpExecArray | null;
    if ((m = GRUB_BOOTING.exec(t)) !== null) {
      b.line.slot = m[2] as Slot;
      b.line.trial = m[1] !== undefined;
      b.slotSeen = true;
    } else if ((m = CMDLINE_SLOT.exec(t)) !== null) {
      b.line.slot = m[1] as Slot;
      if (CMDLINE_TRIAL.test(t)) b.line.trial = true;
      b.slotSeen = true;
    } else if ((m = GUEST_INITRD_LINE.exec(t)) !== null) {
      b.initrd = { version: m[1]!, line: t.trim() };
    } else if ((m = GUEST_BOOT.exec(t)) !== null) {
      b.line = { slot: m[1] as Slot, version: m[2] ?? "?", trial: m[3] === "1" };
      b.slotSeen = true;
      b.versionSeen = true;
    }
    if (PANIC.test(t)) b.panicked = true;
    if (AGENT_LINE.test(t)) b.agentLines.push(t.trim());
    if (b.readyMs === undefined && AGENT_READY.test(t)) b.readyMs = l.ms;
  }
  return boots.map((b, i) => {
    const { slotSeen: _s, versionSeen, ...rest } = b;
    rest.settled = versionSeen || rest.panicked || i < boots.length - 1;
    if (!versionSeen) rest.line.version = versionOf(rest.line.slot, i) ?? "?";
    return rest;
  });
}

/**
 * The `msg` of the agent's JSON log lines (pino) whose `time` passes `when`, each once, in
 * order; a line that is not the agent's is skipped.
 */
export function agentMessages(
  lines: readonly string[],
  when: (epochMs: number) => boolean,
): string[] {
  const out: string[] = [];
  for (const l of lines) {
    const i = l.indexOf('{"level"');
    if (i < 0) continue;
    let rec: {
      time?: number;
      msg?: string;
      err?: string | { message?: string };
      step?: string;
      phase?: string;
      why?: string;
    };
    try {
      rec = JSON.parse(l.slice(i)) as typeof rec;
    } catch {
      continue; // a line the console cut or interleaved
    }
    if (rec.time === undefined || rec.msg === undefined || !when(rec.time)) continue;
    const err = typeof rec.err === "string" ? rec.err : rec.err?.message;
    // "phase" and "begin"/"end" say little without the phase or step they are about.
    const what =
      rec.phase !== undefined
        ? `phase ${rec.phase}${rec.why ? ` (${rec.why})` : ""}`
        : rec.step !== undefined
          ? `${rec.step}: ${rec.msg}`
          : rec.msg;
    const text = err ? `${what}: ${err}` : what;
    if (!out.includes(text)) out.push(text);
  }
  return out;
}
