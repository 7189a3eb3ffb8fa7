// The record of one local control plane: state.json in its data directory, naming its ports,
// its certificates and every process it started by pid, so that `down`, the reaper and a later
// run's cleanup stop exactly those. Read strictly (an unreadable record is an error, never "no
// record") and written atomically.
import { existsSync, readFileSync, readdirSync, renameSync, writeFileSync } from "node:fs";
import path from "node:path";
import type { ClientCaFiles, ControlPlaneCerts } from "./certs.js";
import { isLikenError } from "../errors.js";
import { ControlPlaneError } from "./errors.js";
import { clustersDir } from "./paths.js";
import type { Binary } from "./versions.js";

export interface ProcessRecord {
  name: Binary;
  pid: number;
  log: string;
}

export interface ControlPlaneState {
  name: string;
  version: string;
  dataDir: string;
  /** When set, the control plane belongs to this process and is torn down when it dies. */
  ownerPid?: number;
  server: string;
  kubeconfig: string;
  binDir: string;
  certs: ControlPlaneCerts;
  ports: {
    etcd: number;
    etcdPeer: number;
    apiserver: number;
    controllerManager: number;
    scheduler: number;
    kwok: number;
  };
  processes: ProcessRecord[];
  startedAt: string;
  /** UpOptions.signingDurationSeconds, as the controller manager was started with it. */
  signingDurationSeconds?: number;
  /**
   * With UpOptions.rotatableClientCa: the client CA bundle and the signers' CA, files of their
   * own (certs.ts rotateClientCa replaces them); otherwise both are certs.caCert.
   */
  clientCa?: ClientCaFiles;
}

export function dataDirOf(name: string): string {
  return path.join(clustersDir(), name);
}

function stateFile(dataDir: string): string {
  return path.join(dataDir, "state.json");
}

export function stateFileOf(name: string): string {
  return stateFile(dataDirOf(name));
}

/**
 * The record of control plane `name`, or undefined when there is none. A record that exists
 * but cannot be read is an error, never "no record": treating it as absent would let the
 * cleanup delete the directory while the processes it lists run on, unowned.
 */
export function readState(name: string): ControlPlaneState | undefined {
  const f = stateFileOf(name);
  if (!existsSync(f)) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(f, "utf8"));
  } catch (e) {
    // Both throw Errors: a SyntaxError for a record cut short, an errno error for a bad file.
    throw unreadable(name, f, (e as Error).message, e);
  }
  const s = parsed as Partial<ControlPlaneState> | null;
  if (
    typeof s?.dataDir !== "string" ||
    !Array.isArray(s.processes) ||
    !s.processes.every((p) => Number.isInteger((p as Partial<ProcessRecord> | null)?.pid))
  ) {
    throw unreadable(name, f, "it lacks dataDir or a list of processes with their pids");
  }
  return s as ControlPlaneState;
}

function unreadable(name: string, file: string, why: string, cause?: unknown): ControlPlaneError {
  return new ControlPlaneError(
    "LIKEN_CLUSTER_STATE_UNREADABLE",
    `control plane "${name}": its record ${file} cannot be read (${why}); ` +
      `stop it with: npm run -s cluster -- down --name ${name} ` +
      `(it stops the processes that name ${dataDirOf(name)} on their command line)`,
    { context: { name, file }, ...(cause === undefined ? {} : { cause }) },
  );
}

export function writeState(s: ControlPlaneState): void {
  const file = stateFile(s.dataDir);
  writeFileSync(`${file}.tmp`, JSON.stringify(s, null, 2));
  // rename is atomic: a reader sees the old or the new record, never half of one.
  renameSync(`${file}.tmp`, file);
}

/** Every readable record; each unreadable one is reported through log and left alone. */
export function listStates(log: (l: string) => void = () => {}): ControlPlaneState[] {
  if (!existsSync(clustersDir())) return [];
  return readdirSync(clustersDir()).flatMap((n) => {
    try {
      return readState(n) ?? [];
    } catch (e) {
      if (!isLikenError(e, "LIKEN_CLUSTER_STATE_UNREADABLE")) throw e;
      log(`liken: ${e.message}`);
      return [];
    }
  });
}
