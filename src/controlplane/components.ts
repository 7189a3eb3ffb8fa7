// Starting a control plane's five components (etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler, kwok) in order, each recorded by pid the moment it is spawned (so a failed
// start is still stopped by pid), and waiting on each one's health endpoint, with its log's
// tail in the error when it exits or is not ready in time.
import { spawn } from "node:child_process";
import { closeSync, openSync, readFileSync } from "node:fs";
import https from "node:https";
import http from "node:http";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { kwokStageFiles } from "./build.js";
import { KWOK_NODE_ANNOTATION } from "./kwok.js";
import { ControlPlaneError } from "./errors.js";
import { pidAlive } from "./lock.js";
import { binaryPath } from "./paths.js";
import { writeState, type ControlPlaneState, type ProcessRecord } from "./state.js";
import type { Binary } from "./versions.js";

/** Readiness deadline for each component; a cold kube-apiserver on 2 busy cores needs ~20 s. */
const READY_TIMEOUT_MS = 120_000;

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

export async function startAll(
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
