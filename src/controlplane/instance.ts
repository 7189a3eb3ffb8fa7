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
import { kubeconfigYaml } from "./kubeconfig.js";
import { makeCerts, type ControlPlaneCerts } from "./certs.js";
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
}

export interface UpOptions {
  name?: string;
  /** A fixed API server port; otherwise a free one. */
  port?: number;
  ownerPid?: number;
  log?: (line: string) => void;
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

export function readState(name: string): ControlPlaneState | undefined {
  const f = stateFile(dataDirOf(name));
  if (!existsSync(f)) return undefined;
  try {
    return JSON.parse(readFileSync(f, "utf8")) as ControlPlaneState;
  } catch {
    return undefined;
  }
}

function writeState(s: ControlPlaneState): void {
  const file = stateFile(s.dataDir);
  writeFileSync(`${file}.tmp`, JSON.stringify(s, null, 2));
  // rename is atomic: a reader sees the old or the new record, never half of one.
  renameSync(`${file}.tmp`, file);
}

/** True when pid runs one of our binaries with this data directory on its command line. */
function ours(pid: number, dataDir: string): boolean {
  if (!pidAlive(pid)) return false;
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").includes(dataDir);
  } catch {
    return false;
  }
}

export function listStates(): ControlPlaneState[] {
  if (!existsSync(clustersDir())) return [];
  return readdirSync(clustersDir())
    .map((n) => readState(n))
    .filter((s): s is ControlPlaneState => s !== undefined);
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
  const s = readState(name);
  if (s) {
    const alive = running(s);
    if (
      alive.length === s.processes.length &&
      alive.length > 0 &&
      (!s.ownerPid || pidAlive(s.ownerPid))
    )
      return false;
    await stopProcesses(s);
  }
  rmSync(dir, { recursive: true, force: true });
  log(`liken: removed a stale control plane "${name}" left by a killed run (${dir})`);
  return true;
}

/** Cleans every test control plane whose owner process is gone. */
export async function sweepOrphans(log: (l: string) => void = () => {}): Promise<void> {
  for (const s of listStates()) {
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
  const existing = readState(name);
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
    `--client-ca-file=${certs.caCert}`,
    `--token-auth-file=${path.join(d, "pki", "tokens.csv")}`,
    "--authorization-mode=RBAC",
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
    "--controllers=*",
    "--leader-elect=false",
    `--service-account-private-key-file=${certs.saKey}`,
    `--root-ca-file=${certs.caCert}`,
    `--cluster-signing-cert-file=${certs.caCert}`,
    `--cluster-signing-key-file=${certs.caKey}`,
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
    "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
    `--server-address=127.0.0.1:${ports.kwok}`,
    "--node-lease-duration-seconds=40",
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

async function stopProcesses(s: ControlPlaneState): Promise<void> {
  // Reverse start order: the datastore goes last.
  const procs = [...s.processes].reverse().filter((p) => ours(p.pid, s.dataDir));
  for (const p of procs) {
    try {
      process.kill(p.pid, "SIGTERM");
    } catch {
      // already gone
    }
  }
  const deadline = Date.now() + STOP_GRACE_MS;
  while (Date.now() < deadline && procs.some((p) => ours(p.pid, s.dataDir))) await sleep(100);
  for (const p of procs) {
    if (ours(p.pid, s.dataDir)) {
      try {
        process.kill(p.pid, "SIGKILL");
      } catch {
        // gone between the check and the kill
      }
    }
  }
  while (procs.some((p) => pidAlive(p.pid) && ours(p.pid, s.dataDir))) await sleep(50);
}

/** Stops exactly the processes this control plane started and removes its data directory. */
export async function down(name = "default"): Promise<boolean> {
  const s = readState(name);
  if (s) await stopProcesses(s);
  const dir = dataDirOf(name);
  const existed = existsSync(dir);
  rmSync(dir, { recursive: true, force: true });
  return existed;
}
