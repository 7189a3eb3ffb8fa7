// The Machine's name when agent.yaml names none (docs/agent.md, "machine"): the hostname, or,
// when the hostname says nothing of this machine (localhost, empty: an image that left it
// unset), the DMI serial (/sys/class/dmi/id/product_serial). One image installed on 50 machines
// thus needs no agent.yaml of its own per machine. Resolved once, at start-up; a pure decision.
import { readFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { hostname } from "node:os";
import path from "node:path";
import { writeFileAtomic } from "../slots/atomic.js";
import { AgentError } from "./errors.js";

export const DMI_SERIAL = "/sys/class/dmi/id/product_serial";
export const MACHINE_FROM = ["hostname", "dmi-serial"] as const;
export type MachineFrom = (typeof MACHINE_FROM)[number];

/** What firmware writes when nobody set a serial: not a name of this machine. */
const PLACEHOLDER_SERIALS = new Set([
  "",
  "0",
  "none",
  "n/a",
  "default string",
  "to be filled by o.e.m.",
  "system serial number",
  "not specified",
  "not applicable",
  "0123456789",
]);

/** Hostnames an image leaves when nothing named the machine. */
const PLACEHOLDER_HOSTS = new Set(["", "localhost", "localhost.localdomain", "(none)"]);

/** A Kubernetes object name (RFC 1123 subdomain, 253 characters at most). */
const NAME_RE = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** A serial made a name: lower case, any run of other characters a '-', trimmed. */
export function nameOfSerial(serial: string): string {
  return serial
    .toLowerCase()
    .replace(/[^a-z0-9.]+/g, "-")
    .replace(/\.{2,}/g, ".")
    .replace(/^[-.]+|[-.]+$/g, "")
    .slice(0, 253)
    .replace(/[-.]+$/, "");
}

export interface HostNames {
  hostname: string;
  /** The DMI serial, undefined when the file cannot be read (no DMI: a VM without it, ARM). */
  serial: string | undefined;
}

export interface ResolvedName {
  machine: string;
  from: MachineFrom;
}

/**
 * The name found at the first start, kept on the state partition: later starts use it, whatever
 * the hostname says then (a DHCP lease that came after the first start, a rename), because the
 * machine's certificate and its Machine carry that name. Delete the file to name it again.
 */
export const REMEMBERED_NAME = "machine-name";

export async function readRememberedName(stateDir: string): Promise<string | undefined> {
  let text: string;
  try {
    text = await readFile(path.join(stateDir, REMEMBERED_NAME), "utf8");
  } catch {
    return undefined;
  }
  const name = text.trim();
  return NAME_RE.test(name) ? name : undefined;
}

export async function rememberName(stateDir: string, name: string): Promise<void> {
  await writeFileAtomic(path.join(stateDir, REMEMBERED_NAME), `${name}\n`);
}

/** The name, and where it came from; `prefer` is agent.yaml's machineFrom (default hostname). */
export function resolveMachineName(h: HostNames, prefer: MachineFrom, file: string): ResolvedName {
  const host = h.hostname.trim().toLowerCase();
  const hostOk = !PLACEHOLDER_HOSTS.has(host) && NAME_RE.test(host);
  const raw = (h.serial ?? "").trim();
  const serial = PLACEHOLDER_SERIALS.has(raw.toLowerCase()) ? "" : nameOfSerial(raw);
  const serialOk = serial !== "" && NAME_RE.test(serial);
  const order: MachineFrom[] =
    prefer === "hostname" ? ["hostname", "dmi-serial"] : ["dmi-serial", "hostname"];
  for (const from of order) {
    if (from === "hostname" && hostOk) return { machine: host, from };
    if (from === "dmi-serial" && serialOk) return { machine: serial, from };
  }
  throw new AgentError(
    "LIKEN_AGENT_CONFIG_INVALID",
    `${file}: no machine name: the hostname "${h.hostname}" ${hostOk ? "" : "is not one (a placeholder, or not a valid name) "}and the DMI serial ${h.serial === undefined ? `(${DMI_SERIAL}) cannot be read` : `"${raw}" is ${serialOk ? "" : "a placeholder or not a valid name"}`}; set machine: in agent.yaml, or give the machine a hostname`,
    { context: { file, field: "machine", hostname: h.hostname, serial: h.serial } },
  );
}

/** This host's names, as the agent reads them at start-up. */
export function readHostNames(): HostNames {
  let serial: string | undefined;
  try {
    serial = readFileSync(DMI_SERIAL, "utf8");
  } catch {
    serial = undefined;
  }
  return { hostname: hostname(), serial };
}
