// The agent's config file (default /etc/liken/agent.yaml): the two slots, which one runs,
// and where slot metadata lives. Other sections of the file belong to other modules and are
// left to them; the fields below are checked strictly.
import { readFile } from "node:fs/promises";
import path from "node:path";
import { parse } from "yaml";
import { check, refusalText } from "../schema/index.js";
import { SlotError } from "./errors.js";
import { slotsFile, type SlotName } from "./schema.js";

export const DEFAULT_CONFIG = "/etc/liken/agent.yaml";
export const DEFAULT_CMDLINE = "/proc/cmdline";
export { SLOT_NAMES, type SlotName } from "./schema.js";

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

function isSlotName(v: unknown): v is SlotName {
  return v === "a" || v === "b";
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
  // The declaration (./schema.ts) checks every key this module owns; the rest of the file
  // belongs to other modules, which check it themselves.
  const d = check(slotsFile, doc, (first, all) => {
    throw new SlotError("LIKEN_SLOT_CONFIG_INVALID", `${file}: ${refusalText(all)}`, {
      context: { file, field: first.field },
    });
  });
  const dir = path.dirname(path.resolve(file));
  const slots = {
    a: { device: path.resolve(dir, d.slots.a.device) },
    b: { device: path.resolve(dir, d.slots.b.device) },
  };
  // Two spellings of one path ("b.img", "./b.img") are the same device: compared resolved.
  if (slots.a.device === slots.b.device)
    throw new SlotError(
      "LIKEN_SLOT_CONFIG_INVALID",
      `${file}: slots.b.device is the same as slots.a.device (${slots.a.device}); give each slot its own device`,
      { context: { file, field: "slots.b.device" } },
    );
  return {
    slots,
    ...(d.running === undefined ? {} : { running: d.running }),
    cmdline: d.cmdline === undefined ? DEFAULT_CMDLINE : path.resolve(dir, d.cmdline),
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
