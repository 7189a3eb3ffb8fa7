// Which processes are a control plane's own, and stopping them. A pid alone is not proof (the
// kernel reuses pids): a process is ours only while it names the data directory on its command
// line. A record that cannot be read is no excuse to leave its processes running: they are
// found by that command line instead.
import { readFileSync, readdirSync } from "node:fs";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { isLikenError } from "../errors.js";
import { pidAlive } from "./lock.js";
import {
  dataDirOf,
  readState,
  stateFileOf,
  type ControlPlaneState,
  type ProcessRecord,
} from "./state.js";

/** How long a component gets to exit on SIGTERM before SIGKILL. */
const STOP_GRACE_MS = 10_000;

/** The processes a cleanup stops, and the directory they must name to be ours. */
export interface Doomed {
  dataDir: string;
  pids: number[];
  /** The record they came from; absent when it could not be read. */
  state?: ControlPlaneState;
}

/**
 * What the cleanup of `name` stops: the pids its record lists, or, when the record cannot be
 * read, every process that names the data directory on its command line (each component is
 * started with paths inside it). A corrupt record never leaves processes running unowned.
 */
export function doomed(name: string, log: (l: string) => void): Doomed | undefined {
  try {
    const s = readState(name);
    return s && { dataDir: s.dataDir, pids: s.processes.map((p) => p.pid), state: s };
  } catch (e) {
    if (!isLikenError(e, "LIKEN_CLUSTER_STATE_UNREADABLE")) throw e;
    const dataDir = dataDirOf(name);
    const pids = pidsNaming(dataDir);
    log(
      `liken: control plane "${name}": its record ${stateFileOf(name)} cannot be read; ` +
        `stopping the processes that name ${dataDir} on their command line: ${pids.join(", ") || "none"}`,
    );
    return { dataDir, pids };
  }
}

/**
 * True when pid runs with this data directory, or a path inside it, as one of its arguments
 * (`--data-dir=<dir>/etcd`, `--kubeconfig=<dir>/kubeconfig`): a whole path, so the cleanup of
 * "test-1" never takes a process of "test-10" for its own.
 */
function ours(pid: number, dataDir: string): boolean {
  if (!pidAlive(pid)) return false;
  let cmdline: string;
  try {
    cmdline = readFileSync(`/proc/${pid}/cmdline`, "utf8");
  } catch {
    return false;
  }
  return cmdline.split("\0").some((arg) => {
    const value = arg.slice(arg.indexOf("=") + 1);
    return value === dataDir || value.startsWith(`${dataDir}${path.sep}`);
  });
}

/** Every process that names dataDir on its command line, oldest pid first. */
function pidsNaming(dataDir: string): number[] {
  return readdirSync("/proc")
    .filter((e) => /^\d+$/.test(e))
    .map(Number)
    .filter((pid) => pid !== process.pid && ours(pid, dataDir))
    .sort((a, b) => a - b);
}

export function running(s: ControlPlaneState): ProcessRecord[] {
  return s.processes.filter((p) => ours(p.pid, s.dataDir));
}

export async function stopProcesses({ dataDir, pids }: Doomed): Promise<void> {
  // Reverse start order: the datastore goes last.
  const procs = [...pids].reverse().filter((pid) => ours(pid, dataDir));
  for (const pid of procs) {
    try {
      process.kill(pid, "SIGTERM");
    } catch {
      // already gone
    }
  }
  const deadline = Date.now() + STOP_GRACE_MS;
  while (Date.now() < deadline && procs.some((pid) => ours(pid, dataDir))) await sleep(100);
  for (const pid of procs) {
    if (ours(pid, dataDir)) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        // gone between the check and the kill
      }
    }
  }
  while (procs.some((pid) => ours(pid, dataDir))) await sleep(50);
}
