// The agent's config file (default /etc/liken/agent.yaml): the two slots, which one runs,
// and where slot metadata lives. Other sections of the file belong to other modules and are
// left to them; the fields below are checked strictly.
import { readFile } from "node:fs/promises";
import path from "node:path";
import { parse } from "yaml";
import { SlotError } from "./errors.js";

export const DEFAULT_CONFIG = "/etc/liken/agent.yaml";
export const DEFAULT_CMDLINE = "/proc/cmdline";
export const SLOT_NAMES = ["a", "b"] as const;
export type SlotName = (typeof SLOT_NAMES)[number];

export interface SlotConfig {
  /** Block device, partition or regular file holding the slot. */
  device: string;
}

export interface AgentSlotsConfig {
  slots: Record<SlotName, SlotConfig>;
  /** The running slot if the config names it; else `liken.slot=` in `cmdline` decides. */
  running?: SlotName;
  /** The kernel command line to read `liken.slot=` from (config key `cmdline`, default /proc/cmdline). */
  cmdline: string;
  /** Slot metadata: markers, stored release documents, download progress. */
  stateDir: string;
  /** Where the file was read from; relative paths in it resolve against its directory. */
  file: string;
}

function invalid(file: string, field: string, what: string): never {
  throw new SlotError("LIKEN_SLOT_CONFIG_INVALID", `${file}: ${field} ${what}`, {
    context: { file, field },
  });
}

function isSlotName(v: unknown): v is SlotName {
  return v === "a" || v === "b";
}

function parseSlot(
  file: string,
  dir: string,
  slots: Record<string, unknown>,
  name: SlotName,
): SlotConfig {
  const s = slots[name] as Record<string, unknown> | undefined;
  if (typeof s !== "object" || s === null || typeof s.device !== "string" || s.device === "") {
    invalid(file, `slots.${name}.device`, "must name a block device, partition or file");
  }
  for (const k of Object.keys(s)) {
    if (k !== "device") invalid(file, `slots.${name}.${k}`, "is not a known field (known: device)");
  }
  return { device: path.resolve(dir, s.device) };
}

/** The `cmdline` key: the file to read `liken.slot=` from, relative to the config's directory. */
function cmdlineFile(file: string, dir: string, v: unknown): string {
  if (v === undefined) return DEFAULT_CMDLINE;
  if (typeof v !== "string" || v === "")
    invalid(file, "cmdline", "must name the file holding the kernel command line");
  return path.resolve(dir, v);
}

export function parseAgentConfig(text: string, file: string): AgentSlotsConfig {
  let doc: unknown;
  try {
    doc = parse(text, { maxAliasCount: 0, uniqueKeys: true });
  } catch (cause) {
    throw new SlotError(
      "LIKEN_SLOT_CONFIG_INVALID",
      `${file}: not valid YAML: ${(cause as Error).message}`,
      { cause },
    );
  }
  if (typeof doc !== "object" || doc === null) invalid(file, "(document)", "must be a mapping");
  const d = doc as Record<string, unknown>;
  const dir = path.dirname(path.resolve(file));
  const slots = d.slots as Record<string, unknown> | undefined;
  if (typeof slots !== "object" || slots === null)
    invalid(file, "slots", "must map a and b to devices");
  for (const k of Object.keys(slots))
    if (!isSlotName(k)) invalid(file, `slots.${k}`, "is not a slot name (a or b)");
  const out = { a: parseSlot(file, dir, slots, "a"), b: parseSlot(file, dir, slots, "b") };
  if (out.a.device === out.b.device)
    invalid(file, "slots.b.device", "is the same as slots.a.device");
  if (d.running !== undefined && !isSlotName(d.running)) invalid(file, "running", "must be a or b");
  if (typeof d.stateDir !== "string" || d.stateDir === "")
    invalid(file, "stateDir", "must name a directory for slot metadata");
  return {
    slots: out,
    ...(isSlotName(d.running) ? { running: d.running } : {}),
    cmdline: cmdlineFile(file, dir, d.cmdline),
    stateDir: path.resolve(dir, d.stateDir),
    file,
  };
}

export async function loadAgentConfig(file = DEFAULT_CONFIG): Promise<AgentSlotsConfig> {
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (cause) {
    throw new SlotError(
      "LIKEN_SLOT_CONFIG_INVALID",
      `cannot read the agent config ${file}: ${(cause as Error).message}`,
      { cause },
    );
  }
  return parseAgentConfig(text, file);
}

/** `liken.slot=a` on the kernel command line, as the bootloader entry of each slot sets it. */
export function slotFromCmdline(cmdline: string): SlotName | undefined {
  const m = /(?:^|\s)liken\.slot=(\S+)/.exec(cmdline);
  return m && isSlotName(m[1]) ? m[1] : undefined;
}

/** Which slot runs: an explicit override, else the config's `running`, else its `cmdline` file. */
export async function runningSlot(c: AgentSlotsConfig, override?: string): Promise<SlotName> {
  if (override !== undefined) {
    if (!isSlotName(override))
      throw new SlotError("LIKEN_SLOT_RUNNING_UNKNOWN", `--running ${override}: must be a or b`);
    return override;
  }
  if (c.running) return c.running;
  const cmdline = await readFile(c.cmdline, "utf8").catch(() => "");
  const s = slotFromCmdline(cmdline);
  if (!s) {
    throw new SlotError(
      "LIKEN_SLOT_RUNNING_UNKNOWN",
      `cannot tell which slot runs: ${c.file} sets no "running" and ${c.cmdline} has no liken.slot=a|b; set one of them`,
    );
  }
  return s;
}

export function otherSlot(s: SlotName): SlotName {
  return s === "a" ? "b" : "a";
}
