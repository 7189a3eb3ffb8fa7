// The agent's part of its config file (default /etc/liken/agent.yaml; docs/agent.md). The
// slots part (slots, stateDir, running) is parsed by src/slots/config.ts from the same file;
// this reads the rest, strictly: an unknown key is an error, so a typo never silently
// falls back to a default.
import { readFile } from "node:fs/promises";
import path from "node:path";
import { parse } from "yaml";
import type { V1LabelSelector } from "@kubernetes/client-node";
import type { BootloaderConfig } from "../bootloader/index.js";
import type { DriverPodSelectors } from "../drain/index.js";
import { parseMetricsAddress, type ListenAddress } from "../metrics/serve.js";
import { loadAgentConfig, type AgentSlotsConfig } from "../slots/config.js";
import { LOST_AFTER_SECONDS } from "../api/types.js";
import { AgentError } from "./errors.js";
import {
  DEFAULT_HEALTH_TIMEOUT_SECONDS,
  MAX_HEALTH_TIMEOUT_SECONDS,
  type HealthCommand,
} from "./health.js";
import { DEFAULT_TIMEOUTS, type Timeouts } from "./steps.js";

/** The kernel's boot id: a random UUID made at every boot. */
export const DEFAULT_BOOT_ID = "/proc/sys/kernel/random/boot_id";

export interface RebootConfig {
  /** The command that reboots the machine (default: systemctl reboot). */
  command?: string[];
  /**
   * Instead of a command, exit with this code after every state is synced: the machine
   * supervisor (systemd in the lab image, or src/lab/machine.ts) plays the reboot.
   */
  exitCode?: number;
}

export interface AgentConfig {
  file: string;
  slots: AgentSlotsConfig;
  /** The Machine object's name (also the heartbeat Lease's). */
  machine: string;
  /** The Cluster the Machine belongs to (used when the agent registers its Machine). */
  cluster: string;
  /** The Node this machine runs as (default: the machine name). */
  nodeName: string;
  /** Kubeconfig file of the agent's identity; absent: KUBECONFIG or in-cluster. */
  kubeconfig?: string;
  /** Which bootloader backend, and where its state lives (createBootloader() builds it). */
  bootloader: BootloaderConfig;
  /** Driver name -> the pods that run it, for the drain's DRA ordering (docs/drain.md). */
  driverPods: DriverPodSelectors;
  /** Where `liken.slot=` is read from (default /proc/cmdline). */
  cmdline: string;
  /** This boot's identity, new at every boot (default /proc/sys/kernel/random/boot_id). */
  bootId: string;
  reboot: RebootConfig;
  heartbeatMs: number;
  /** How often the loop looks again when nothing woke it. */
  loopMs: number;
  /** Read artifacts back with O_DIRECT (default true; false for files on tmpfs). */
  direct: boolean;
  timeouts: Timeouts;
  /** Where to serve Prometheus metrics (docs/metrics.md); absent: not served (the default). */
  metricsAddress?: ListenAddress;
  /** Host checks a trial boot must pass before it is promoted (health.ts); absent: none. */
  health?: { commands: HealthCommand[] };
}

const KNOWN = new Set([
  // src/slots/config.ts owns these four.
  "slots",
  "stateDir",
  "running",
  "cmdline",
  "bootId",
  "machine",
  "cluster",
  "nodeName",
  "kubeconfig",
  "bootloader",
  "reboot",
  "heartbeatSeconds",
  "loopSeconds",
  "direct",
  "timeouts",
  "drain",
  "metricsAddress",
  "health",
]);

function bad(file: string, field: string, what: string): never {
  throw new AgentError("LIKEN_AGENT_CONFIG_INVALID", `${file}: ${field} ${what}`, {
    context: { file, field },
  });
}

function str(
  file: string,
  d: Record<string, unknown>,
  k: string,
  required: boolean,
): string | undefined {
  const v = d[k];
  if (v === undefined && !required) return undefined;
  if (typeof v !== "string" || v === "") bad(file, k, "must be a non-empty string");
  return v;
}

function positive(file: string, field: string, v: unknown, fallback: number): number {
  if (v === undefined) return fallback;
  if (typeof v !== "number" || !(v > 0)) bad(file, field, "must be a positive number");
  return v;
}

/**
 * Node's timers hold a 32-bit signed count of milliseconds: a longer delay is replaced by
 * 1 ms with a TimeoutOverflowWarning, so a timeout past it would fire at once.
 */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * The slowest heartbeat the operator's Lost rule allows: a quarter of the Lost threshold, so
 * three renewals in a row can be lost or late before the machine reads Lost (the kubelet
 * renews its node Lease at the same fraction, 10 s of 40 s). A slower heartbeat makes the
 * operator mark a live agent Lost again and again (docs/agent.md, "Bounds").
 */
export const MAX_HEARTBEAT_SECONDS = LOST_AFTER_SECONDS / 4;
/** Each renewal is a PUT: faster than once a second loads the API server for nothing. */
export const MIN_HEARTBEAT_SECONDS = 1;
/**
 * The loop's own look (the command line, the boot id, both slot markers) runs every turn:
 * more often than ten times a second is busy-waiting.
 */
export const MIN_LOOP_SECONDS = 0.1;
/**
 * The loop's turn is what notices a phase timeout and a download's progress when no watch
 * woke it: slower than the shortest default wait (downloadRetryMs, 60 s) it would double it.
 */
export const MAX_LOOP_SECONDS = 60;
/**
 * No phase finishes in less than a second (a status write, a drain, a read-back): a shorter
 * timeout fails every time.
 */
export const MIN_TIMEOUT_MS = 1000;

/** A number within [min, max] (in the field's own unit), or the fallback when absent. */
function bounded(
  file: string,
  field: string,
  v: unknown,
  fallback: number,
  [min, max, why]: readonly [number, number, string],
): number {
  const n = positive(file, field, v, fallback);
  if (n < min || n > max) bad(file, field, `must be between ${min} and ${max}: ${why}`);
  return n;
}

const HEARTBEAT_BOUNDS = [
  MIN_HEARTBEAT_SECONDS,
  MAX_HEARTBEAT_SECONDS,
  `the operator reads a machine Lost after ${LOST_AFTER_SECONDS} s without a renewal, so a slower heartbeat makes a live machine read Lost; lower it`,
] as const;
const LOOP_BOUNDS = [
  MIN_LOOP_SECONDS,
  MAX_LOOP_SECONDS,
  "the loop notices timeouts and download progress at this pace (docs/agent.md)",
] as const;
const TIMEOUT_BOUNDS = [
  MIN_TIMEOUT_MS,
  MAX_TIMER_MS,
  "milliseconds; Node fires a longer timer at once, and no phase ends in under a second",
] as const;

function parseReboot(file: string, v: unknown): RebootConfig {
  if (v === undefined) return { command: ["systemctl", "reboot"] };
  if (typeof v !== "object" || v === null) bad(file, "reboot", "must be a mapping");
  const r = v as Record<string, unknown>;
  for (const k of Object.keys(r))
    if (k !== "command" && k !== "exitCode") bad(file, `reboot.${k}`, "is not a known field");
  if (r.command !== undefined) {
    if (
      !Array.isArray(r.command) ||
      r.command.length === 0 ||
      !r.command.every((c) => typeof c === "string")
    )
      bad(file, "reboot.command", "must be a non-empty list of strings");
    return { command: r.command as string[] };
  }
  if (
    typeof r.exitCode !== "number" ||
    !Number.isInteger(r.exitCode) ||
    r.exitCode < 2 ||
    r.exitCode > 254
  )
    bad(file, "reboot", "needs command (a list) or exitCode (2..254)");
  return { exitCode: r.exitCode };
}

function parseTimeouts(file: string, v: unknown): Timeouts {
  if (v === undefined) return { ...DEFAULT_TIMEOUTS };
  if (typeof v !== "object" || v === null) bad(file, "timeouts", "must be a mapping");
  const t = { ...DEFAULT_TIMEOUTS };
  for (const [k, x] of Object.entries(v)) {
    if (!(k in t))
      bad(file, `timeouts.${k}`, `is not a known timeout (known: ${Object.keys(t).join(", ")})`);
    t[k as keyof Timeouts] = bounded(file, `timeouts.${k}`, x, 0, TIMEOUT_BOUNDS);
  }
  return t;
}

const BOOTLOADER_FIELDS: Record<BootloaderConfig["backend"], readonly string[]> = {
  grub: ["envDir"],
  "systemd-boot": ["esp", "efivars"],
};
const BOOTLOADER_EXAMPLE =
  "write `bootloader: {backend: grub, envDir: /boot/efi/EFI/liken}` or " +
  "`bootloader: {backend: systemd-boot, esp: /boot/efi, efivars: /sys/firmware/efi/efivars}`";

function parseBootloader(file: string, v: unknown, rel: (p: string) => string): BootloaderConfig {
  if (typeof v !== "object" || v === null || Array.isArray(v))
    bad(file, "bootloader", `must be a mapping: ${BOOTLOADER_EXAMPLE}`);
  const b = v as Record<string, unknown>;
  // The first spelling, `bootloader: {grubenvDir: DIR}`, keeps working on machines installed
  // with it: it means the GRUB backend with that directory.
  if (b.backend === undefined && Object.keys(b).join() === "grubenvDir") {
    return { backend: "grub", envDir: rel(pathField(file, b, "grubenvDir")) };
  }
  const backend = b.backend;
  if (backend !== "grub" && backend !== "systemd-boot")
    bad(file, "bootloader.backend", `must be grub or systemd-boot: ${BOOTLOADER_EXAMPLE}`);
  const known = BOOTLOADER_FIELDS[backend];
  for (const k of Object.keys(b)) {
    if (k !== "backend" && !known.includes(k))
      bad(
        file,
        `bootloader.${k}`,
        `is not a field of the ${backend} backend (its fields: backend, ${known.join(", ")})`,
      );
  }
  if (backend === "grub") return { backend, envDir: rel(pathField(file, b, "envDir")) };
  return {
    backend,
    esp: rel(pathField(file, b, "esp")),
    efivars: rel(pathField(file, b, "efivars")),
  };
}

function pathField(file: string, b: Record<string, unknown>, k: string): string {
  const v = b[k];
  if (typeof v !== "string" || v === "") bad(file, `bootloader.${k}`, "must name a directory");
  return v;
}

/** `drain: {driverPods: {DRIVER: {namespace?, selector: {matchLabels?, matchExpressions?}}}}`. */
function parseDrain(file: string, v: unknown): DriverPodSelectors {
  if (v === undefined) return {};
  if (typeof v !== "object" || v === null || Array.isArray(v))
    bad(file, "drain", "must be a mapping");
  const out: Record<string, DriverPodSelectors[string]> = {};
  for (const [k, x] of Object.entries(v)) {
    if (k !== "driverPods") bad(file, `drain.${k}`, "is not a known field (known: driverPods)");
    if (typeof x !== "object" || x === null || Array.isArray(x))
      bad(file, "drain.driverPods", "must map driver names to {namespace?, selector}");
    for (const [driver, sel] of Object.entries(x)) out[driver] = driverPods(file, driver, sel);
  }
  return out;
}

function driverPods(file: string, driver: string, v: unknown): DriverPodSelectors[string] {
  const at = `drain.driverPods.${driver}`;
  const e = mapping(file, at, v, ["namespace", "selector"]);
  if (e.namespace !== undefined && (typeof e.namespace !== "string" || e.namespace === ""))
    bad(file, `${at}.namespace`, "must be a namespace name");
  return {
    ...(typeof e.namespace === "string" ? { namespace: e.namespace } : {}),
    selector: labelSelector(file, `${at}.selector`, e.selector),
  };
}

/** A mapping with only the `known` keys. */
function mapping(
  file: string,
  at: string,
  v: unknown,
  known: readonly string[],
): Record<string, unknown> {
  if (typeof v !== "object" || v === null || Array.isArray(v))
    bad(file, at, `must be a mapping {${known.join(", ")}}`);
  for (const k of Object.keys(v))
    if (!known.includes(k))
      bad(file, `${at}.${k}`, `is not a known field (known: ${known.join(", ")})`);
  return v as Record<string, unknown>;
}

/** A metav1.LabelSelector with matchLabels, matchExpressions or both (never empty). */
function labelSelector(file: string, at: string, v: unknown): V1LabelSelector {
  const s = mapping(file, at, v, ["matchLabels", "matchExpressions"]);
  const labels = s.matchLabels;
  if (
    labels !== undefined &&
    (typeof labels !== "object" ||
      labels === null ||
      !Object.values(labels).every((x) => typeof x === "string"))
  )
    bad(file, `${at}.matchLabels`, "must map label keys to string values");
  const exprs = s.matchExpressions;
  if (exprs !== undefined && !(Array.isArray(exprs) && exprs.every(isExpression)))
    bad(
      file,
      `${at}.matchExpressions`,
      "must be a list of {key, operator: In|NotIn|Exists|DoesNotExist, values?}",
    );
  if (labels === undefined && exprs === undefined)
    bad(file, at, "must name matchLabels or matchExpressions (an empty one matches every pod)");
  return s as V1LabelSelector;
}

function isExpression(x: unknown): boolean {
  const r = x as { key?: unknown; operator?: unknown; values?: unknown } | null;
  return (
    typeof r === "object" &&
    r !== null &&
    typeof r.key === "string" &&
    ["In", "NotIn", "Exists", "DoesNotExist"].includes(r.operator as string) &&
    (r.values === undefined ||
      (Array.isArray(r.values) && r.values.every((v) => typeof v === "string")))
  );
}

/** `health: {commands: [{name, command: [argv...], timeoutSeconds?}]}`. */
function parseHealth(file: string, v: unknown): { commands: HealthCommand[] } {
  if (v === undefined) return { commands: [] };
  const h = mapping(file, "health", v, ["commands"]);
  if (h.commands === undefined) return { commands: [] };
  if (!Array.isArray(h.commands))
    bad(file, "health.commands", "must be a list of {name, command, timeoutSeconds?}");
  const names = new Set<string>();
  const commands = h.commands.map((x: unknown, i: number): HealthCommand => {
    const at = `health.commands[${i}]`;
    const c = mapping(file, at, x, ["name", "command", "timeoutSeconds"]);
    if (typeof c.name !== "string" || !/^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/.test(c.name))
      bad(file, `${at}.name`, "must be a name of letters, digits, '.', '_' or '-' (at most 63)");
    if (names.has(c.name)) bad(file, `${at}.name`, `${c.name} is named twice`);
    names.add(c.name);
    if (
      !Array.isArray(c.command) ||
      c.command.length === 0 ||
      !c.command.every((a) => typeof a === "string") ||
      c.command[0] === ""
    )
      bad(
        file,
        `${at}.command`,
        'must be a non-empty list of strings (argv; for a shell: [sh, -c, "..."])',
      );
    const timeout = positive(
      file,
      `${at}.timeoutSeconds`,
      c.timeoutSeconds,
      DEFAULT_HEALTH_TIMEOUT_SECONDS,
    );
    if (timeout > MAX_HEALTH_TIMEOUT_SECONDS)
      bad(file, `${at}.timeoutSeconds`, `must be at most ${MAX_HEALTH_TIMEOUT_SECONDS}`);
    return { name: c.name, command: c.command as string[], timeoutSeconds: timeout };
  });
  return { commands };
}

function parseMetrics(file: string, v: unknown): { metricsAddress?: ListenAddress } {
  if (v === undefined) return {};
  if (typeof v !== "string") bad(file, "metricsAddress", 'must be "host:port" or "off"');
  try {
    const at = parseMetricsAddress(v);
    return at === undefined ? {} : { metricsAddress: at };
  } catch (e) {
    return bad(file, "metricsAddress", `${(e as Error).message}`);
  }
}

export function parseAgentSection(
  text: string,
  file: string,
  slots: AgentSlotsConfig,
): AgentConfig {
  const d = parse(text, { maxAliasCount: 0, uniqueKeys: true }) as Record<string, unknown>;
  for (const k of Object.keys(d)) if (!KNOWN.has(k)) bad(file, k, "is not a known field");
  const dir = path.dirname(path.resolve(file));
  const rel = (p: string): string => path.resolve(dir, p);
  const machine = str(file, d, "machine", true)!;
  const kubeconfig = str(file, d, "kubeconfig", false);
  if (d.direct !== undefined && typeof d.direct !== "boolean")
    bad(file, "direct", "must be true or false");
  return {
    file,
    slots,
    machine,
    cluster: str(file, d, "cluster", true)!,
    nodeName: str(file, d, "nodeName", false) ?? machine,
    ...(kubeconfig === undefined ? {} : { kubeconfig: rel(kubeconfig) }),
    bootloader: parseBootloader(file, d.bootloader, rel),
    driverPods: parseDrain(file, d.drain),
    cmdline: slots.cmdline,
    bootId: rel(str(file, d, "bootId", false) ?? DEFAULT_BOOT_ID),
    reboot: parseReboot(file, d.reboot),
    heartbeatMs: bounded(file, "heartbeatSeconds", d.heartbeatSeconds, 10, HEARTBEAT_BOUNDS) * 1000,
    loopMs: bounded(file, "loopSeconds", d.loopSeconds, 5, LOOP_BOUNDS) * 1000,
    direct: d.direct !== false,
    timeouts: parseTimeouts(file, d.timeouts),
    ...parseMetrics(file, d.metricsAddress),
    health: parseHealth(file, d.health),
  };
}

export async function loadConfig(file: string): Promise<AgentConfig> {
  const slots = await loadAgentConfig(file);
  const text = await readFile(file, "utf8");
  return parseAgentSection(text, file, slots);
}
