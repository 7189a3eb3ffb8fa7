// One local control plane: etcd, kube-apiserver, kube-controller-manager, kube-scheduler and
// kwok, on loopback, on free ports, in a data directory of their own, so two can run side by
// side. Every process it starts is recorded by pid in state.json and stopped by pid, never by
// name; a record whose processes outlived their owner (a killed test runner) is cleaned up.
//
// Its pieces: the record (state.ts), which processes are its own and stopping them
// (processes.ts), starting the components and waiting on them (components.ts); here, `up`,
// `down` and the cleanup of what a killed run left.
import { existsSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { randomBytes } from "node:crypto";
import { kubeconfigYaml } from "../api/kubeconfig-doc.js";
import { makeCerts, separateClientCa } from "./certs.js";
import { startAll } from "./components.js";
import { isLikenError } from "../errors.js";
import { ControlPlaneError } from "./errors.js";
import { pidAlive } from "./lock.js";
import { binDir } from "./paths.js";
import { assertPortFree, freePort } from "./ports.js";
import { doomed, running, stopProcesses } from "./processes.js";
import { dataDirOf, listStates, readState, writeState, type ControlPlaneState } from "./state.js";
import { KUBERNETES_VERSION } from "./versions.js";

export { running } from "./processes.js";
export {
  dataDirOf,
  listStates,
  readState,
  stateFileOf,
  type ControlPlaneState,
  type ProcessRecord,
} from "./state.js";

export interface UpOptions {
  name?: string;
  /** A fixed API server port; otherwise a free one. */
  port?: number;
  ownerPid?: number;
  log?: (line: string) => void;
  /**
   * kube-controller-manager's --cluster-signing-duration in seconds: the longest certificate
   * its signers issue (default one year). The lab and the integration tier make it minutes so
   * machine certificates rotate while one watches (docs/machine.md, "Identity").
   */
  signingDurationSeconds?: number;
  /**
   * The API server's client CA and the signers' CA in files of their own, so that a test can
   * rotate them under running clients (certs.ts rotateClientCa) while the serving certificate
   * and the tokens stay: what a person who rotates a cluster's client CA does.
   */
  rotatableClientCa?: boolean;
}

async function allocatePorts(port?: number): Promise<ControlPlaneState["ports"]> {
  if (port !== undefined) await assertPortFree(port, "kube-apiserver");
  return {
    etcd: await freePort(),
    etcdPeer: await freePort(),
    apiserver: port ?? (await freePort()),
    controllerManager: await freePort(),
    scheduler: await freePort(),
    kwok: await freePort(),
  };
}

/** Removes what a killed run left behind under `name`; returns true if anything was stale. */
export async function cleanStale(
  name: string,
  log: (l: string) => void = () => {},
): Promise<boolean> {
  const dir = dataDirOf(name);
  if (!existsSync(dir)) return false;
  const d = doomed(name, log);
  const s = d?.state;
  if (
    s &&
    running(s).length === s.processes.length &&
    s.processes.length > 0 &&
    (!s.ownerPid || pidAlive(s.ownerPid))
  )
    return false;
  if (d) await stopProcesses(d);
  rmSync(dir, { recursive: true, force: true });
  log(`liken: removed a stale control plane "${name}" left by a killed run (${dir})`);
  return true;
}

/** Cleans every test control plane whose owner process is gone. */
export async function sweepOrphans(log: (l: string) => void = () => {}): Promise<void> {
  for (const s of listStates(log)) {
    if (s.ownerPid !== undefined && !pidAlive(s.ownerPid)) await cleanStale(s.name, log);
  }
}

/**
 * Free ports are picked by binding port 0 and closing it; another process can take one
 * before our component binds it (many control planes start at once on a CI machine). Such
 * a start is retried on fresh ports; anything else fails at once.
 */
const PORT_RACE_ATTEMPTS = 3;

function isPortRace(e: unknown): boolean {
  return (
    e instanceof ControlPlaneError &&
    e.code === "LIKEN_CLUSTER_COMPONENT_EXITED" &&
    /address already in use/.test(e.message)
  );
}

export async function up(opts: UpOptions = {}): Promise<ControlPlaneState> {
  const name = opts.name ?? "default";
  const log = opts.log ?? (() => {});
  let existing: ControlPlaneState | undefined;
  try {
    existing = readState(name);
  } catch (e) {
    // An unreadable record is stale by definition: cleanStale below stops what it ran.
    if (!isLikenError(e, "LIKEN_CLUSTER_STATE_UNREADABLE")) throw e;
  }
  if (
    existing &&
    running(existing).length === existing.processes.length &&
    existing.processes.length === 5
  ) {
    return existing;
  }
  await cleanStale(name, log);
  for (let attempt = 1; ; attempt++) {
    try {
      return await startOnce(name, opts, log);
    } catch (e) {
      await down(name);
      if (opts.port !== undefined || attempt >= PORT_RACE_ATTEMPTS || !isPortRace(e)) throw e;
      log(`  a port was taken by another process while starting; trying again on fresh ports`);
    }
  }
}

async function startOnce(
  name: string,
  opts: UpOptions,
  log: (l: string) => void,
): Promise<ControlPlaneState> {
  const dataDir = dataDirOf(name);
  mkdirSync(path.join(dataDir, "logs"), { recursive: true });
  mkdirSync(path.join(dataDir, "pki"), { recursive: true });
  const certs = makeCerts(path.join(dataDir, "pki"));
  const ports = await allocatePorts(opts.port);
  const token = randomBytes(24).toString("hex");
  writeFileSync(path.join(dataDir, "pki", "tokens.csv"), `${token},admin,admin,"system:masters"\n`);
  const server = `https://127.0.0.1:${ports.apiserver}`;
  const kubeconfig = path.join(dataDir, "kubeconfig");
  writeFileSync(
    kubeconfig,
    kubeconfigYaml({ server, caFile: certs.caCert, user: "admin", credentials: { token } }),
    { mode: 0o600 },
  );
  const s: ControlPlaneState = {
    name,
    version: KUBERNETES_VERSION,
    dataDir,
    ...(opts.ownerPid !== undefined ? { ownerPid: opts.ownerPid } : {}),
    server,
    kubeconfig,
    binDir: binDir(),
    certs,
    ports,
    processes: [],
    startedAt: new Date().toISOString(),
    ...(opts.signingDurationSeconds === undefined
      ? {}
      : { signingDurationSeconds: opts.signingDurationSeconds }),
    ...(opts.rotatableClientCa === true
      ? { clientCa: separateClientCa(certs, path.join(dataDir, "pki")) }
      : {}),
  };
  writeState(s);
  await startAll(s, token, log);
  return s;
}

/**
 * Stops exactly the processes this control plane started (found by their command line when
 * its record cannot be read) and removes its data directory.
 */
export async function down(
  name = "default",
  log: (l: string) => void = () => {},
): Promise<boolean> {
  const d = doomed(name, log);
  if (d) await stopProcesses(d);
  const dir = dataDirOf(name);
  const existed = existsSync(dir);
  rmSync(dir, { recursive: true, force: true });
  return existed;
}
