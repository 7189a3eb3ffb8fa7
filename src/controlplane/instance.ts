// One local control plane: etcd, kube-apiserver, kube-controller-manager, kube-scheduler and
// kwok, on loopback, on free ports, in a data directory of their own, so two can run side by
// side. Every process it starts is recorded by pid in state.json and stopped by pid, never by
// name; a record whose processes outlived their owner (a killed test runner) is cleaned up.
import { spawn } from "node:child_process";
import {
  closeSync,
  existsSync,
  mkdirSync,
  openSync,
  readFileSync,
  readdirSync,
  renameSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import https from "node:https";
import http from "node:http";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { randomBytes } from "node:crypto";
import { kwokStageFiles } from "./build.js";
import { kubeconfigYaml } from "../api/kubeconfig-doc.js";
import { KWOK_NODE_ANNOTATION } from "./kwok.js";
import {
  makeCerts,
  separateClientCa,
  type ClientCaFiles,
  type ControlPlaneCerts,
} from "./certs.js";
import { isLikenError } from "../errors.js";
import { ControlPlaneError } from "./errors.js";
import { pidAlive } from "./lock.js";
import { binDir, binaryPath, clustersDir } from "./paths.js";
import { assertPortFree, freePort } from "./ports.js";
import { KUBERNETES_VERSION, type Binary } from "./versions.js";

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

/** Readiness deadline for each component; a cold kube-apiserver on 2 busy cores needs ~20 s. */
const READY_TIMEOUT_MS = 120_000;
/** How long a component gets to exit on SIGTERM before SIGKILL. */
const STOP_GRACE_MS = 10_000;

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

/** The processes a cleanup stops, and the directory they must name to be ours. */
interface Doomed {
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
function doomed(name: string, log: (l: string) => void): Doomed | undefined {
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

function writeState(s: ControlPlaneState): void {
  const file = stateFile(s.dataDir);
  writeFileSync(`${file}.tmp`, JSON.stringify(s, null, 2));
  // rename is atomic: a reader sees the old or the new record, never half of one.
  renameSync(`${file}.tmp`, file);
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

export function running(s: ControlPlaneState): ProcessRecord[] {
  return s.processes.filter((p) => ours(p.pid, s.dataDir));
}

function logTail(file: string, lines = 8): string {
  try {
    return readFileSync(file, "utf8").trim().split("\n").slice(-lines).join(" | ");
  } catch {
    return "(no log)";
  }
}

/** GET a health endpoint; resolves to the body on 200, undefined otherwise. */
function probe(
  url: string,
  opts: { ca?: Buffer; token?: string; insecure?: boolean },
): Promise<string | undefined> {
  return new Promise((resolve) => {
    const mod = url.startsWith("https") ? https : http;
    const req = mod.get(
      url,
      {
        timeout: 5000,
        ...(opts.ca ? { ca: opts.ca } : {}),
        // The controller manager's and scheduler's own self-signed serving certificates:
        // loopback, our own processes, health only.
        ...(opts.insecure ? { rejectUnauthorized: false } : {}),
        headers: opts.token ? { authorization: `Bearer ${opts.token}` } : {},
      },
      (res) => {
        let body = "";
        res.on("data", (d: Buffer) => (body += d.toString()));
        res.on("end", () => resolve(res.statusCode === 200 ? body : undefined));
      },
    );
    req.on("error", () => resolve(undefined));
    req.on("timeout", () => req.destroy());
  });
}

async function waitReady(
  what: string,
  rec: ProcessRecord,
  check: () => Promise<boolean>,
): Promise<void> {
  const deadline = Date.now() + READY_TIMEOUT_MS;
  while (Date.now() < deadline) {
    if (!pidAlive(rec.pid)) {
      throw new ControlPlaneError(
        "LIKEN_CLUSTER_COMPONENT_EXITED",
        `${what} exited while starting: ${logTail(rec.log)} (full log: ${rec.log})`,
      );
    }
    if (await check()) return;
    await sleep(250);
  }
  throw new ControlPlaneError(
    "LIKEN_CLUSTER_NOT_READY",
    `${what} was not ready within ${READY_TIMEOUT_MS / 1000} s: ${logTail(rec.log)} (full log: ${rec.log})`,
    { retryable: true },
  );
}

function start(s: ControlPlaneState, name: Binary, args: string[]): ProcessRecord {
  const log = path.join(s.dataDir, "logs", `${name}.log`);
  const fd = openSync(log, "a");
  // detached: its own process group, so Ctrl-C on the terminal that ran `up` does not reach
  // it and `down` (or the owner's reaper) is what stops it.
  const child = spawn(binaryPath(name), args, { detached: true, stdio: ["ignore", fd, fd] });
  closeSync(fd);
  child.unref();
  if (child.pid === undefined) {
    throw new ControlPlaneError(
      "LIKEN_CLUSTER_SPAWN",
      `could not start ${name} from ${binaryPath(name)}`,
    );
  }
  const rec = { name, pid: child.pid, log };
  s.processes.push(rec);
  writeState(s);
  return rec;
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

async function startAll(
  s: ControlPlaneState,
  token: string,
  log: (l: string) => void,
): Promise<void> {
  const d = s.dataDir;
  const { ports, certs } = s;
  const etcd = start(s, "etcd", [
    "--name=liken",
    `--data-dir=${path.join(d, "etcd")}`,
    `--listen-client-urls=http://127.0.0.1:${ports.etcd}`,
    `--advertise-client-urls=http://127.0.0.1:${ports.etcd}`,
    `--listen-peer-urls=http://127.0.0.1:${ports.etcdPeer}`,
    `--initial-advertise-peer-urls=http://127.0.0.1:${ports.etcdPeer}`,
    `--initial-cluster=liken=http://127.0.0.1:${ports.etcdPeer}`,
    "--unsafe-no-fsync=true", // a throwaway test datastore: durability is not under test
    "--log-level=warn",
  ]);
  await waitReady(
    "etcd",
    etcd,
    async () =>
      (await probe(`http://127.0.0.1:${ports.etcd}/health`, {}))?.includes('"true"') ?? false,
  );
  log(`  etcd ready on 127.0.0.1:${ports.etcd}`);

  const apiserver = start(s, "kube-apiserver", [
    `--etcd-servers=http://127.0.0.1:${ports.etcd}`,
    "--bind-address=127.0.0.1",
    `--secure-port=${ports.apiserver}`,
    `--cert-dir=${path.join(d, "pki")}`,
    `--tls-cert-file=${certs.servingCert}`,
    `--tls-private-key-file=${certs.servingKey}`,
    `--client-ca-file=${s.clientCa?.bundle ?? certs.caCert}`,
    `--token-auth-file=${path.join(d, "pki", "tokens.csv")}`,
    "--authorization-mode=RBAC",
    // Machines join with a shared bootstrap token (docs/adr/machine-bootstrap-token.md), as
    // kubeadm's clusters allow by default.
    "--enable-bootstrap-token-auth=true",
    "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
    `--service-account-key-file=${certs.saPub}`,
    `--service-account-signing-key-file=${certs.saKey}`,
    "--service-cluster-ip-range=10.96.0.0/16",
    "--allow-privileged=true",
    "--profiling=false",
  ]);
  const ca = readFileSync(certs.caCert);
  await waitReady(
    "kube-apiserver",
    apiserver,
    async () => (await probe(`${s.server}/readyz`, { ca, token })) === "ok",
  );
  log(`  kube-apiserver ready on ${s.server}`);

  const kcm = start(s, "kube-controller-manager", [
    `--kubeconfig=${s.kubeconfig}`,
    `--authentication-kubeconfig=${s.kubeconfig}`,
    `--authorization-kubeconfig=${s.kubeconfig}`,
    "--bind-address=127.0.0.1",
    `--secure-port=${ports.controllerManager}`,
    `--cert-dir=${path.join(d, "kcm")}`,
    // tokencleaner: an expired bootstrap token's Secret is deleted, as in kubeadm's clusters.
    "--controllers=*,tokencleaner",
    "--leader-elect=false",
    `--service-account-private-key-file=${certs.saKey}`,
    `--root-ca-file=${certs.caCert}`,
    `--cluster-signing-cert-file=${s.clientCa?.signerCert ?? certs.caCert}`,
    `--cluster-signing-key-file=${s.clientCa?.signerKey ?? certs.caKey}`,
    ...(s.signingDurationSeconds === undefined
      ? []
      : [`--cluster-signing-duration=${s.signingDurationSeconds}s`]),
    "--use-service-account-credentials=false",
    "--profiling=false",
  ]);
  const scheduler = start(s, "kube-scheduler", [
    `--kubeconfig=${s.kubeconfig}`,
    `--authentication-kubeconfig=${s.kubeconfig}`,
    `--authorization-kubeconfig=${s.kubeconfig}`,
    "--bind-address=127.0.0.1",
    `--secure-port=${ports.scheduler}`,
    `--cert-dir=${path.join(d, "scheduler")}`,
    "--leader-elect=false",
    "--profiling=false",
  ]);
  const kwok = start(s, "kwok", [
    `--kubeconfig=${s.kubeconfig}`,
    "--manage-all-nodes=false",
    `--manage-nodes-with-annotation-selector=${KWOK_NODE_ANNOTATION.key}=${KWOK_NODE_ANNOTATION.value}`,
    `--server-address=127.0.0.1:${ports.kwok}`,
    "--node-lease-duration-seconds=40",
    // The address kwok writes for its Nodes: the machines of the lab and the tests all run on
    // this host, so loopback, the one addressKwokNode writes too. Without it kwok's stages have
    // no address to give, and a node-initialize or heartbeat written from a view older than
    // addressKwokNode's patch wrote `addresses: null`: the Node lost its address for good, and
    // cluster-operator rightly handed its machine to no downloader (NoNodeAddress). CI saw it
    // as a peer assignment that never came (test/integration/agent-peers-*.test.ts); the
    // other order, liken's patch first, is addressKwokNode's to handle (kwok.ts).
    "--node-ip=127.0.0.1",
    ...kwokStageFiles().map((f) => `--config=${f}`),
  ]);
  await waitReady(
    "kube-controller-manager",
    kcm,
    async () =>
      (await probe(`https://127.0.0.1:${ports.controllerManager}/healthz`, { insecure: true })) ===
      "ok",
  );
  await waitReady(
    "kube-scheduler",
    scheduler,
    async () =>
      (await probe(`https://127.0.0.1:${ports.scheduler}/healthz`, { insecure: true })) === "ok",
  );
  await waitReady(
    "kwok",
    kwok,
    async () => (await probe(`http://127.0.0.1:${ports.kwok}/healthz`, {})) !== undefined,
  );
  log("  kube-controller-manager, kube-scheduler and kwok ready");
}

async function stopProcesses({ dataDir, pids }: Doomed): Promise<void> {
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
