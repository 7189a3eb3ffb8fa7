// The agent's part of its config file (default /etc/liken/agent.yaml; docs/agent.md). The
// slots part (slots, stateDir, running, cmdline) is parsed by src/slots/config.ts from the same
// file; this reads the rest, strictly: an unknown key is an error, so a typo never silently
// falls back to a default. What is allowed is declared in ./config-schema.ts; this turns a
// checked file into the agent's settings (defaults, paths against the file's directory).
import { readFile } from "node:fs/promises";
import path from "node:path";
import { parse } from "yaml";
import type { BootloaderConfig } from "../bootloader/index.js";
import type { DriverPodSelectors } from "../drain/index.js";
import { parseMetricsAddress, type ListenAddress } from "../metrics/serve.js";
import { check, refusalText } from "../schema/index.js";
import { loadAgentConfig, type AgentSlotsConfig } from "../slots/config.js";
import {
  agentFile,
  DEFAULT_APPROVAL_WARN_SECONDS,
  DEFAULT_CERT_SECONDS,
  DEFAULT_PEERS_PORT,
  type AgentFile,
} from "./config-schema.js";
import type { IdentitySettings } from "./identity/identity.js";
import { isLikenError } from "../errors.js";
import { AgentError } from "./errors.js";
import { DEFAULT_HEALTH_TIMEOUT_SECONDS, type HealthCommand } from "./health.js";
import { DEFAULT_TIMEOUTS, type Timeouts } from "./steps.js";
import {
  readHostNames,
  readRememberedName,
  rememberName,
  resolveMachineName,
  type HostNames,
  type MachineFrom,
} from "./machine-name.js";
import type { RebootPolicy, Role } from "../api/types.js";

export {
  MAX_HEARTBEAT_SECONDS,
  MAX_LOOP_SECONDS,
  MAX_TIMER_MS,
  MIN_HEARTBEAT_SECONDS,
  MIN_LOOP_SECONDS,
  MIN_TIMEOUT_MS,
} from "./config-schema.js";

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
  /** Where the name came from: agent.yaml, the name kept from the first start, or the host (machine-name.ts). */
  machineFrom?: "config" | "remembered" | MachineFrom;
  /** What the Machine is registered with, when agent.yaml says (registration.ts decides the rest). */
  role?: Role;
  rebootPolicy?: RebootPolicy;
  /** The Cluster the Machine belongs to (used when the agent registers its Machine). */
  cluster: string;
  /** The Node this machine runs as (default: the machine name). */
  nodeName: string;
  /** Kubeconfig file of the agent's identity; absent: KUBECONFIG or in-cluster. */
  kubeconfig?: string;
  /** Join and renewal of the machine's own certificate (identity/); absent: kubeconfig as given. */
  identity?: IdentitySettings;
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
  /**
   * Where to serve verified chunks to peers while the Cluster's spec.peers.enabled is true
   * (docs/peers.md); absent: agent.yaml said "off", this machine never serves.
   */
  peersAddress?: ListenAddress;
  /** Host checks a trial boot must pass before it is promoted (health.ts); absent: none. */
  health?: { commands: HealthCommand[] };
}

/** The first spelling, `bootloader: {grubenvDir: DIR}`, still means the GRUB backend there. */
function firstSpelling(doc: unknown): unknown {
  const d = doc as Record<string, unknown> | null;
  const b = d?.bootloader as Record<string, unknown> | null | undefined;
  if (typeof b !== "object" || b === null || Object.keys(b).join() !== "grubenvDir") return doc;
  return { ...d, bootloader: { backend: "grub", envDir: b.grubenvDir } };
}

function toBootloader(b: AgentFile["bootloader"], rel: (p: string) => string): BootloaderConfig {
  switch (b.backend) {
    case "grub":
      return { backend: b.backend, envDir: rel(b.envDir) };
    case "systemd-boot":
      return { backend: b.backend, esp: rel(b.esp), efivars: rel(b.efivars) };
    default: {
      const never: never = b;
      return never;
    }
  }
}

function toReboot(r: AgentFile["reboot"]): RebootConfig {
  if (r === undefined) return { command: ["systemctl", "reboot"] };
  // A command wins over an exit code (as it always has): the schema has made sure one is there.
  return r.command !== undefined ? { command: r.command } : { exitCode: r.exitCode! };
}

function toDriverPods(d: AgentFile["drain"]): DriverPodSelectors {
  const out: Record<string, DriverPodSelectors[string]> = {};
  for (const [driver, e] of Object.entries(d?.driverPods ?? {}))
    out[driver] = {
      ...(e.namespace === undefined ? {} : { namespace: e.namespace }),
      selector: e.selector,
    };
  return out;
}

function toHealth(h: AgentFile["health"]): { commands: HealthCommand[] } {
  return {
    commands: (h?.commands ?? []).map((c) => ({
      name: c.name,
      command: c.command,
      timeoutSeconds: c.timeoutSeconds ?? DEFAULT_HEALTH_TIMEOUT_SECONDS,
    })),
  };
}

function identityOf(
  d: AgentFile,
  rel: (p: string) => string,
  file: string,
): { identity?: IdentitySettings } {
  if (d.identity === undefined) return {};
  if (d.kubeconfig === undefined) {
    throw new AgentError(
      "LIKEN_AGENT_CONFIG_INVALID",
      `${file}: identity needs kubeconfig (where the agent writes the kubeconfig of its own certificate, e.g. /var/lib/liken/identity/kubeconfig on the state partition)`,
      { context: { file, field: "kubeconfig" } },
    );
  }
  return {
    identity: {
      kubeconfig: rel(d.kubeconfig),
      bootstrapKubeconfig: rel(d.identity.bootstrapKubeconfig),
      expirationSeconds: d.identity.expirationSeconds ?? DEFAULT_CERT_SECONDS,
      approvalWarnMs: (d.identity.approvalWarnSeconds ?? DEFAULT_APPROVAL_WARN_SECONDS) * 1000,
    },
  };
}

/** agent.yaml's machine, else the name kept from the first start, else the host's (machine-name.ts). */
function machineName(
  d: AgentFile,
  file: string,
  host: () => HostNames,
  remembered: string | undefined,
): { machine: string; from: NonNullable<AgentConfig["machineFrom"]> } {
  if (d.machine !== undefined) return { machine: d.machine, from: "config" };
  if (remembered !== undefined) return { machine: remembered, from: "remembered" };
  return resolveMachineName(host(), d.machineFrom ?? "hostname", file);
}

export function parseAgentSection(
  text: string,
  file: string,
  slots: AgentSlotsConfig,
  /** This host's names, read only when agent.yaml names no machine (default: read now). */
  host: () => HostNames = readHostNames,
  /** The name kept on the state partition from the first start, if any. */
  remembered?: string,
): AgentConfig {
  const doc = parse(text, { maxAliasCount: 0, uniqueKeys: true }) as unknown;
  const d = check(agentFile, firstSpelling(doc), (first, all) => {
    throw new AgentError("LIKEN_AGENT_CONFIG_INVALID", `${file}: ${refusalText(all)}`, {
      context: { file, field: first.field, fields: all.map((r) => r.field) },
    });
  });
  const dir = path.dirname(path.resolve(file));
  const rel = (p: string): string => path.resolve(dir, p);
  const metricsAddress =
    d.metricsAddress === undefined ? undefined : parseMetricsAddress(d.metricsAddress);
  const peersAddress = parseMetricsAddress(d.peersAddress ?? `:${DEFAULT_PEERS_PORT}`);
  const name = machineName(d, file, host, remembered);
  return {
    file,
    slots,
    machine: name.machine,
    machineFrom: name.from,
    ...(d.role === undefined ? {} : { role: d.role }),
    ...(d.rebootPolicy === undefined ? {} : { rebootPolicy: d.rebootPolicy }),
    cluster: d.cluster,
    nodeName: d.nodeName ?? name.machine,
    ...(d.kubeconfig === undefined ? {} : { kubeconfig: rel(d.kubeconfig) }),
    ...identityOf(d, rel, file),
    bootloader: toBootloader(d.bootloader, rel),
    driverPods: toDriverPods(d.drain),
    cmdline: slots.cmdline,
    bootId: rel(d.bootId ?? DEFAULT_BOOT_ID),
    reboot: toReboot(d.reboot),
    heartbeatMs: (d.heartbeatSeconds ?? 10) * 1000,
    loopMs: (d.loopSeconds ?? 5) * 1000,
    direct: d.direct !== false,
    timeouts: { ...DEFAULT_TIMEOUTS, ...d.timeouts },
    ...(metricsAddress === undefined ? {} : { metricsAddress }),
    ...(peersAddress === undefined ? {} : { peersAddress }),
    health: toHealth(d.health),
  };
}

export async function loadConfig(
  file: string,
  host: () => HostNames = readHostNames,
): Promise<AgentConfig> {
  let slots: AgentSlotsConfig;
  try {
    slots = await loadAgentConfig(file);
  } catch (e) {
    throw await withAgentProblems(e, file);
  }
  const text = await readFile(file, "utf8");
  const cfg = parseAgentSection(text, file, slots, host, await readRememberedName(slots.stateDir));
  // A name found on the host is kept, so the next start names the same Machine.
  if (cfg.machineFrom === "hostname" || cfg.machineFrom === "dmi-serial")
    await rememberName(slots.stateDir, cfg.machine);
  return cfg;
}

/**
 * Every problem at once (docs/agent.md, "Refusals"): when the slot keys are refused, the rest
 * of the file is checked too, and both lists go out in one refusal, not one per run.
 */
async function withAgentProblems(e: unknown, file: string): Promise<unknown> {
  if (!isLikenError(e, "LIKEN_SLOT_CONFIG_INVALID")) return e;
  // Unreadable or not YAML: that is the one problem there is to tell.
  const text = await readFile(file, "utf8").catch(() => undefined);
  const rest = text === undefined ? undefined : agentSectionProblems(text, file);
  if (rest === undefined) return e;
  return new AgentError("LIKEN_AGENT_CONFIG_INVALID", `${e.message}; ${rest}`, {
    cause: e,
    context: { file, slots: e.context, agent: rest },
  });
}

/** The agent section's refusal text (without the file name), or undefined when it is fine. */
function agentSectionProblems(text: string, file: string): string | undefined {
  // Any slot values: the agent section reads only `cmdline` from them.
  const placeholder: AgentSlotsConfig = {
    slots: { a: { device: "a" }, b: { device: "b" } },
    cmdline: "/proc/cmdline",
    stateDir: "/",
    file,
  };
  try {
    parseAgentSection(text, file, placeholder);
    return undefined;
  } catch (x) {
    return isLikenError(x, "LIKEN_AGENT_CONFIG_INVALID")
      ? x.message.replace(`${file}: `, "")
      : undefined;
  }
}
