// The lab's running parts: cluster-operator as its own process, and one SimulatedMachine per
// fleet member (the real `liken agent run`, file-backed slots, the GRUB firmware model).
import { spawn } from "node:child_process";
import { closeSync, mkdirSync, openSync, readFileSync, readSync, writeFileSync } from "node:fs";
import path from "node:path";
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { setTimeout as sleep } from "node:timers/promises";
import { LikenError } from "../errors.js";
import { kubeconfigYaml } from "../api/kubeconfig-doc.js";
import type { Slot } from "../bootloader/types.js";
import { bootstrapKubeconfig, type LabMachineSpec } from "./fleet.js";
import type { LikenApi } from "../api/client.js";
import type { ControlPlaneState } from "../controlplane/instance.js";
import type { LabRelease } from "./releases.js";
import { LAB_CLUSTER, LAB_DIR, type Lab } from "./lab.js";
import { SimulatedMachine, type LabFault, type SimulatedMachineOptions } from "./machine.js";
import { kernelBehaviour } from "./releases.js";
import { labServiceGate } from "./health-gate.js";
import { likenEntry } from "../cli/entry.js";
import { EVICTION_PATH } from "../operator/webhook/names.js";
import { startWebhookService } from "./webhook-service.js";

const run = promisify(execFile);

/**
 * The firmware "boots the kernel" of a slot: what the first bytes of the slot (the lab
 * release's kernel artifact sits at offset 0) say decides whether the trial comes up,
 * panics or hangs. Read at the moment of each boot, so a release staged after the machine
 * started is judged by its own bytes.
 */
function faultsFromSlotBytes(machine: SimulatedMachine): Partial<Record<Slot, LabFault>> {
  const read = (slot: Slot): LabFault => {
    const buf = Buffer.alloc(256);
    const fd = openSync(machine.slotFile(slot), "r");
    try {
      readSync(fd, buf, 0, buf.length, 0);
    } finally {
      closeSync(fd);
    }
    const b = kernelBehaviour(buf);
    // A release that goes bad after promotion boots and proves as a good one does; its
    // service gate fails later (health-gate.ts).
    return b === "ok" || b === "bad-after-promotion" ? "none" : b;
  };
  return new Proxy({} as Partial<Record<Slot, LabFault>>, {
    get: (_t, slot) => (slot === "a" || slot === "b" ? read(slot) : undefined),
  });
}

/**
 * A ServiceAccount token for cluster-operator, as its Deployment would mount it, in a
 * kubeconfig written to `file` (default: the lab's).
 */
export async function operatorKubeconfig(
  lab: Pick<Lab, "binDir" | "controlPlane">,
  file = path.join(LAB_DIR, "lab", "operator.kubeconfig"),
): Promise<string> {
  const kubectl = path.join(lab.binDir, "kubectl");
  const env = { ...process.env, KUBECONFIG: lab.controlPlane.kubeconfig };
  await run(kubectl, ["create", "serviceaccount", "cluster-operator", "-n", "liken-system"], {
    env,
  }).catch(() => undefined);
  const { stdout } = await run(
    kubectl,
    ["create", "token", "cluster-operator", "-n", "liken-system", "--duration=48h"],
    { env },
  );
  writeFileSync(
    file,
    kubeconfigYaml({
      server: lab.controlPlane.server,
      caFile: lab.controlPlane.certs.caCert,
      user: "cluster-operator",
      credentials: { token: stdout.trim() },
    }),
    { mode: 0o600 },
  );
  return file;
}

/**
 * Where a copy serves the eviction check, and the URL registered for it: the API server runs
 * on loopback, so it reaches the copies through the lab's stand-in for their Service.
 */
export interface OperatorWebhook {
  port: number;
  url: string;
}

/**
 * Where a copy writes its log (default: the lab's), and an upper bound of its life in
 * seconds: with it, the copy runs under `timeout`, which ends it even if the process that
 * started it dies by SIGKILL (the lab has its reaper instead; a test scenario has not).
 */
export interface OperatorProcessOptions {
  logFile?: string;
  lifetimeSeconds?: number;
  /** Added to this process's environment (the proxy variables, src/verify/proxy.ts). */
  env?: Record<string, string>;
  /** `--start-grace` in seconds; absent: the shipped 40 s (START_GRACE_SECONDS). */
  startGraceSeconds?: number;
  /** `--channel-interval` in seconds; absent: the shipped 5 minutes. */
  channelIntervalSeconds?: number;
}

export function startOperator(
  lab: Pick<Lab, "stoppers">,
  kubeconfig: string,
  id: string,
  webhook: OperatorWebhook,
  opts: OperatorProcessOptions = {},
): number {
  const logFile = opts.logFile ?? path.join(LAB_DIR, "lab", `operator-${id}.log`);
  const fd = openSync(logFile, "a");
  const timeout =
    opts.lifetimeSeconds === undefined
      ? []
      : ["timeout", "--kill-after=10", String(opts.lifetimeSeconds)];
  const [program, ...prefix] = [...timeout, process.execPath];
  const child = spawn(
    program!,
    // Two copies on one host: each on a free loopback port for its metrics (the URL is in its log).
    [
      ...prefix,
      likenEntry(),
      "operator",
      "--kubeconfig",
      kubeconfig,
      "--identity",
      id,
      "--webhook-listen",
      `127.0.0.1:${webhook.port}`,
      "--webhook-url",
      webhook.url,
      "--metrics-address",
      "127.0.0.1:0",
      ...(opts.startGraceSeconds === undefined
        ? []
        : ["--start-grace", `${opts.startGraceSeconds}s`]),
      ...(opts.channelIntervalSeconds === undefined
        ? []
        : ["--channel-interval", `${opts.channelIntervalSeconds}s`]),
    ],
    {
      stdio: ["ignore", fd, fd],
      ...(opts.env !== undefined ? { env: { ...process.env, ...opts.env } } : {}),
    },
  );
  closeSync(fd);
  lab.stoppers.push(async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill("SIGCONT"); // a copy paused on demand must be able to hear SIGTERM
    child.kill("SIGTERM");
    await new Promise((r) => child.once("exit", r));
  });
  return child.pid ?? 0;
}

export interface Fleet {
  machines: Map<string, SimulatedMachine>;
  operators: Map<string, number>;
}

/** Two copies, as the operator's Deployment runs them: correctness never rests on one. */
const OPERATOR_COPIES = ["operator-1", "operator-2"];

/** How long simulated machines get to boot and report their release (2 busy cores). */
const FLEET_REPORT_TIMEOUT_MS = 180_000;

/**
 * Waits until every machine named runs `version` by its Machine status. Exported for the rings
 * scene (rings.ts), whose clusters' machines join after the lab's.
 */
export async function waitForReports(
  api: LikenApi,
  names: readonly string[],
  version: string,
): Promise<void> {
  const deadline = Date.now() + FLEET_REPORT_TIMEOUT_MS;
  for (;;) {
    const { items } = await api.machines.list();
    const silent = names.filter(
      (n) => items.find((m) => m.metadata.name === n)?.status?.version !== version,
    );
    if (silent.length === 0) return;
    if (Date.now() > deadline) {
      throw new LikenError(
        "LIKEN_LAB_FLEET_SILENT",
        `machines ${silent.join(", ")} did not report ${version} within ${FLEET_REPORT_TIMEOUT_MS / 1000} s; see .lab/lab/machines/<name>/agent.log`,
      );
    }
    await sleep(500);
  }
}

/** What a caller may set on every machine of the fleet (a bench: the production loop timings). */
export type FleetMachineOptions = Pick<
  SimulatedMachineOptions,
  "loopSeconds" | "heartbeatSeconds" | "slotSize" | "env"
>;

/**
 * Where a machine's agent reaches the API server, when not directly (the torture's relay per
 * machine, src/torture/relay.ts): its bootstrap kubeconfig, and so its own identity's, names it.
 */
export interface FleetNetwork {
  serverOf?: (machine: string) => string | undefined;
}

/**
 * Where simulated machines join: a control plane, the Cluster they belong to, their fleet's
 * bootstrap credential. The lab's own fleet is one; the rings scene adds a Cluster beside it
 * and one on a control plane of its own (rings.ts).
 */
export interface MachinePlace {
  controlPlane: ControlPlaneState;
  cluster: string;
  /** The fleet's shared bootstrap kubeconfig (bootstrapKubeconfig in fleet.ts). */
  bootstrap: string;
}

/**
 * Creates one SimulatedMachine per spec and installs `release` into its slot a (the factory
 * image); powered off. The caller powers them on once an operator runs to approve their joins.
 */
export async function prepareMachines(
  place: MachinePlace,
  specs: readonly LabMachineSpec[],
  channelUrl: string,
  release: LabRelease,
  machineOptions: FleetMachineOptions = {},
  network: FleetNetwork = {},
): Promise<SimulatedMachine[]> {
  const machines: SimulatedMachine[] = [];
  for (const spec of specs) {
    const dir = path.join(LAB_DIR, "lab", "machines", spec.name);
    mkdirSync(dir, { recursive: true });
    const server = network.serverOf?.(spec.name);
    const ownBootstrap = path.join(dir, "bootstrap.kubeconfig");
    if (server !== undefined) {
      const text = readFileSync(place.bootstrap, "utf8").replace(place.controlPlane.server, server);
      writeFileSync(ownBootstrap, text, { mode: 0o600 });
    }
    const m = new SimulatedMachine({
      ...machineOptions,
      name: spec.name,
      dir,
      cluster: place.cluster,
      // Only the fleet's bootstrap credential: each agent joins for its own certificate.
      bootstrapKubeconfig: server === undefined ? place.bootstrap : ownBootstrap,
      // The stand-in kubelet writes Node status, which the agents' own identity may not.
      kubeletKubeconfig: place.controlPlane.kubeconfig,
      healthCommands: [labServiceGate(dir)],
    });
    await m.create();
    m.faults = faultsFromSlotBytes(m);
    machines.push(m);
  }
  // The factory image: every machine starts on the first release, verified into slot a.
  await Promise.all(machines.map((m) => m.install(channelUrl, release.version, release.digest)));
  return machines;
}

/** Powers the machines on; the lab stops each on its way out. */
export function powerOn(lab: Pick<Lab, "stoppers">, machines: readonly SimulatedMachine[]): void {
  for (const m of machines) {
    m.powerOn();
    lab.stoppers.push(() => m.stop());
  }
}

/**
 * The operator copies' settings. startGraceSeconds: `npm run lab -- --start-grace N`, for the
 * lab's end-to-end tests, which need not wait the page's 40 s before each scenario's first turn
 * (test/integration/operator-grace.test.ts proves the shipped grace); absent, the shipped one.
 */
export interface FleetOperatorOptions {
  startGraceSeconds?: number;
  /** How often each copy reads the channel (the torture's recall: a bound it can judge by). */
  channelIntervalSeconds?: number;
}

export async function startFleet(
  lab: Lab,
  log: (l: string) => void,
  machineOptions: FleetMachineOptions = {},
  network: FleetNetwork = {},
  operatorOptions: FleetOperatorOptions = {},
): Promise<Fleet> {
  const current = lab.releases[0]!;
  const bootstrap = await bootstrapKubeconfig(
    lab.controlPlane,
    lab.kubeConfig,
    path.join(LAB_DIR, "lab", "bootstrap.kubeconfig"),
  );
  const machines = await prepareMachines(
    { controlPlane: lab.controlPlane, cluster: LAB_CLUSTER, bootstrap },
    lab.fleet,
    lab.channel.url,
    current,
    machineOptions,
    network,
  );
  // The operators start before the machines: their approver turns each machine's bootstrap
  // request into its certificate. A machine joins within seconds of its power-on, well inside
  // the 40 s a silent machine has before it reads Lost.
  const opKubeconfig = await operatorKubeconfig(lab);
  const service = await startWebhookService(OPERATOR_COPIES.length);
  lab.stoppers.push(() => service.close());
  const url = `https://127.0.0.1:${service.port}${EVICTION_PATH}`;
  const operators = new Map(
    OPERATOR_COPIES.map((id, i) => [
      id,
      startOperator(lab, opKubeconfig, id, { port: service.backends[i]!, url }, operatorOptions),
    ]),
  );
  powerOn(lab, machines);
  await waitForReports(
    lab.api,
    lab.fleet.map((f) => f.name),
    current.version,
  );
  log(`  ${machines.length} machines powered on and joined, running ${current.version}`);
  const grace = operatorOptions.startGraceSeconds;
  log(
    `  cluster-operator started (${OPERATOR_COPIES.join(", ")})` +
      (grace === undefined ? "" : `, start-up grace ${grace} s (--start-grace)`),
  );
  return { machines: new Map(machines.map((m) => [m.opts.name, m])), operators };
}
