// A fleet played by the test, for cluster-operator's integration tests: real Cluster and
// Machine objects and real heartbeat Leases on the real API server, and a small model of
// the agent's side of a turn, exactly as docs/operator.md states the protocol:
//   stage -> status {step UpdatePending|RebootPending, staged, turnRequest}
//   see own name in Cluster status.rebootTurns for the staged release -> step Updating
//   (updateStage Draining ... Rebooting; heartbeat may stop while "rebooting")
//   come back -> status {version: new, step Ready}, turnRequest and staged cleared.
// An independent observer records, at every instant this process sees, the turns recorded,
// the machines actually down (acting on a turn) and the leaders among them.
import { spawn, type ChildProcess } from "node:child_process";
import { writeFileSync } from "node:fs";
import path from "node:path";
import { CoordinationV1Api } from "@kubernetes/client-node";
import { afterAll, afterEach, beforeAll } from "vitest";
import {
  HeartbeatClient,
  LikenApi,
  ResourceWatcher,
  type Cluster,
  type Machine,
  type MachineStatus,
  type Role,
} from "../../src/api/index.js";
import { parseBudget } from "../../src/operator/turns/budget.js";
import {
  eventsWhere,
  kubeConfig,
  kubeconfigPath,
  kubectl,
  uniqueName,
  waitFor,
  type EventSeen,
} from "../support/kube.js";
import { seeded } from "../support/seed.js";

export const V1 = "2026.10.10-001";
export const V2 = "2026.10.12-001";
export const D1 = `sha256:${"1".repeat(64)}`;
export const D2 = `sha256:${"2".repeat(64)}`;

export const api = new LikenApi(kubeConfig(), "liken-test");
const hb = new HeartbeatClient(kubeConfig());
const REPO = path.resolve(import.meta.dirname, "../..");

export const now = (): string => new Date().toISOString();

export async function ensureNamespaces(): Promise<void> {
  for (const ns of ["liken-heartbeats", "liken-system"]) {
    const r = await kubectl(["get", "namespace", ns]);
    if (r.code !== 0) await kubectl(["create", "namespace", ns]);
  }
}

export interface MachinePlan {
  name: string;
  role?: Role;
  policy?: "Auto" | "Manual";
}

export async function createCluster(
  name: string,
  opts: {
    maxUnavailable?: number | string;
    source?: string;
    version?: string;
    rollout?: NonNullable<Cluster["spec"]["rollout"]>;
  } = {},
): Promise<Cluster> {
  return api.clusters.create({
    apiVersion: "liken.sh/v1alpha1",
    kind: "Cluster",
    metadata: { name },
    spec: {
      version: opts.version ?? V2,
      releases: {
        source: opts.source ?? "http://127.0.0.1:9/",
        catalog: [
          { version: V1, digest: D1 },
          { version: V2, digest: D2 },
        ],
      },
      disruption: { maxUnavailable: opts.maxUnavailable ?? 1 },
      ...(opts.rollout === undefined ? {} : { rollout: opts.rollout }),
    },
  });
}

export async function createMachine(cluster: string, p: MachinePlan): Promise<Machine> {
  const m = await api.machines.create({
    apiVersion: "liken.sh/v1alpha1",
    kind: "Machine",
    metadata: { name: p.name, labels: { "liken.sh/cluster": cluster } },
    spec: {
      cluster,
      nodeName: p.name,
      role: p.role ?? "Worker",
      rebootPolicy: p.policy ?? "Auto",
    },
  });
  return writeStatus(m, { version: V1, digest: D1, step: "Ready" });
}

/** Replace the Machine's status with `status` (re-reading on a 409, as an agent does). */
export async function writeStatus(m: Machine | string, status: MachineStatus): Promise<Machine> {
  const name = typeof m === "string" ? m : m.metadata.name;
  const r = await api.machines.updateStatus(name, (cur) => ({ ...cur, status }));
  if (r === undefined) throw new Error(`status of ${name} not written`);
  return r;
}

export async function patchMachineStatus(
  name: string,
  patch: Partial<MachineStatus>,
): Promise<Machine> {
  const r = await api.machines.updateStatus(name, (cur) => ({
    ...cur,
    status: { ...cur.status, ...patch },
  }));
  if (r === undefined) throw new Error(`status of ${name} not written`);
  return r;
}

/** The status a machine reports once it staged V2 and asks for its turn. */
export function stagedStatus(policy: "Auto" | "Manual" = "Auto"): MachineStatus {
  const at = now();
  return {
    version: V1,
    digest: D1,
    step: policy === "Auto" ? "UpdatePending" : "RebootPending",
    target: { version: V2, digest: D2 },
    staged: { version: V2, digest: D2, slot: "b", at },
    turnRequest: { version: V2, digest: D2, at },
  };
}

const leases = kubeConfig().makeApiClient(CoordinationV1Api);

export async function deleteAll(cluster: string, machines: string[]): Promise<void> {
  await api.clusters.delete(cluster).catch(() => undefined);
  await Promise.all(
    machines.map(async (m) => {
      await api.machines.delete(m).catch(() => undefined);
      await leases
        .deleteNamespacedLease({ name: m, namespace: "liken-heartbeats" })
        .catch(() => undefined);
    }),
  );
}

// ---------------------------------------------------------------------------------------
// Heartbeats

export class Heartbeats {
  private timer: NodeJS.Timeout | undefined;
  readonly silent = new Set<string>();

  constructor(
    private readonly cluster: string,
    private readonly machines: string[],
    private readonly everyMs = 500,
  ) {}

  async start(): Promise<void> {
    await this.beat();
    this.timer = setInterval(() => void this.beat(), this.everyMs);
  }

  stop(): void {
    clearInterval(this.timer);
  }

  private async beat(): Promise<void> {
    await Promise.all(
      this.machines
        .filter((m) => !this.silent.has(m))
        .map((m) => hb.renew(m, this.cluster).catch(() => undefined)),
    );
  }
}

// ---------------------------------------------------------------------------------------
// The operator as a real process

export interface OperatorProcess {
  child: ChildProcess;
  identity: string;
  log: () => string;
  stop(): Promise<void>;
}

export function startOperator(
  opts: {
    identity?: string;
    args?: string[];
    env?: NodeJS.ProcessEnv;
  } = {},
): OperatorProcess {
  const identity = opts.identity ?? uniqueName("op");
  const child = spawn(
    path.join(REPO, "bin", "liken.js"),
    [
      "operator",
      "--kubeconfig",
      kubeconfigPath(),
      "--identity",
      identity,
      // A free port each: copies and parallel test files never fight over the default :8080.
      "--metrics-address",
      "127.0.0.1:0",
      ...(opts.args ?? []),
    ],
    { cwd: REPO, stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, ...opts.env } },
  );
  let out = "";
  child.stdout?.on("data", (b: Buffer) => (out += b.toString()));
  child.stderr?.on("data", (b: Buffer) => (out += b.toString()));
  return {
    child,
    identity,
    log: () => out,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise<void>((r) => child.once("exit", () => r()));
      try {
        process.kill(child.pid!, "SIGCONT");
        process.kill(child.pid!, "SIGTERM");
      } catch {
        return;
      }
      // SIGTERM gets 5 s to end it; past that deadline, SIGKILL.
      const ended = await waitFor(
        `operator ${identity} to exit on SIGTERM`,
        async () => child.exitCode !== null || child.signalCode !== null,
        { timeoutMs: 5000, intervalMs: 50 },
      ).then(
        () => true,
        () => false,
      );
      if (!ended) child.kill("SIGKILL");
      await exited;
    },
  };
}

/** startOperator with `args`, stopped through `cleanups` when the test file ends. */
export function startOperatorUndone(
  cleanups: Cleanups,
  id: string,
  args: string[],
  env: NodeJS.ProcessEnv = {},
): OperatorProcess {
  const op = startOperator({ identity: uniqueName(id), args, env });
  cleanups.push(() => op.stop());
  return op;
}

/**
 * startOperatorUndone with `args` (its identity `id`-..., "op" unless given), once its log says
 * "cluster-operator started" (within `timeoutMs`, 90 s unless given).
 */
export async function startedOperator(
  cleanups: Cleanups,
  args: string[],
  o: { id?: string; timeoutMs?: number } = {},
): Promise<OperatorProcess> {
  const op = startOperatorUndone(cleanups, o.id ?? "op", args);
  await waitForLog(op, "cluster-operator started", o.timeoutMs ?? 90_000);
  return op;
}

export async function waitForLog(
  op: OperatorProcess,
  text: string,
  timeoutMs = 30_000,
): Promise<void> {
  await waitFor(`operator ${op.identity} to log "${text}"`, async () => op.log().includes(text), {
    timeoutMs,
  });
}

// ---------------------------------------------------------------------------------------
// Simulated agents and the independent observer

export interface SimOptions {
  /** How long a machine stays down on its turn (ms): [min, max). */
  downMs?: [number, number];
  /** Machines that stop their heartbeat while "rebooting". */
  silentWhileRebooting?: boolean;
  heartbeats?: Heartbeats;
  /** Machines whose trial falls back: they come back on V1, step Failed, and say why. */
  failTrial?: ReadonlySet<string>;
  /** Where the downtimes come from; by default a generator seeded (and logged) per Fleet. */
  random?: () => number;
  /** A machine that stays down until this settles, instead of a drawn downtime. */
  downUntil?: (machine: string) => Promise<void> | undefined;
}

export interface Violation {
  at: string;
  what: string;
}

/**
 * Plays every machine's agent and watches the Cluster. Every observed Cluster version is
 * checked: turns recorded <= budget, leader turns <= 1; every instant a machine acts on a
 * turn is checked: machines acting <= budget, leaders acting <= 1, and each acts only on a
 * record it saw.
 */
export class Fleet {
  readonly violations: Violation[] = [];
  readonly maxSeen = { turns: 0, acting: 0, leadersActing: 0 };
  readonly grantsSeen: string[] = [];
  /** When this process first saw each machine's turn recorded (its own clock, ms). */
  readonly grantSeenAt = new Map<string, number>();
  /** Which operator copies granted the turns seen (grantedBy). */
  readonly grantors = new Set<string>();
  private readonly acting = new Set<string>();
  private readonly done = new Set<string>();
  private readonly watcher: ResourceWatcher<Cluster>;
  private readonly roles = new Map<string, Role>();
  private stopped = false;
  private readonly pending: Promise<unknown>[] = [];
  private readonly random: () => number;

  constructor(
    readonly cluster: string,
    plans: MachinePlan[],
    private readonly opts: SimOptions = {},
  ) {
    this.random = opts.random ?? seeded(`fleet ${cluster} downtimes`).random;
    for (const p of plans) this.roles.set(p.name, p.role ?? "Worker");
    this.watcher = new ResourceWatcher(
      api.clusters,
      { onChange: (ev) => this.onCluster(ev.object) },
      { fieldSelector: `metadata.name=${cluster}` },
    );
  }

  async start(): Promise<void> {
    await this.watcher.start();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.watcher.stop();
    await Promise.allSettled(this.pending);
  }

  get finished(): ReadonlySet<string> {
    return this.done;
  }

  private budgetOf(c: Cluster): number {
    return parseBudget(c.spec.disruption?.maxUnavailable, this.roles.size).budget;
  }

  private onCluster(c: Cluster): void {
    if (c.metadata.name !== this.cluster) return;
    const turns = c.status?.rebootTurns ?? [];
    const budget = this.budgetOf(c);
    const leaders = turns.filter((t) => t.leader).length;
    this.maxSeen.turns = Math.max(this.maxSeen.turns, turns.length);
    if (turns.length > budget) {
      this.violate(
        `${turns.length} turns recorded (${turns.map((t) => t.machine).join(",")}) > budget ${budget}`,
      );
    }
    if (leaders > 1) this.violate(`${leaders} leader turns recorded`);
    if (this.stopped) return;
    for (const t of turns) {
      if (this.acting.has(t.machine) || this.done.has(t.machine)) continue;
      if (!this.roles.has(t.machine) || t.version !== V2) continue;
      this.grantsSeen.push(t.machine);
      this.grantSeenAt.set(t.machine, Date.now());
      this.grantors.add(t.grantedBy);
      this.pending.push(this.takeTurn(t.machine, budget));
    }
  }

  private violate(what: string): void {
    this.violations.push({ at: now(), what });
  }

  private async takeTurn(name: string, budget: number): Promise<void> {
    this.acting.add(name);
    const leadersActing = [...this.acting].filter((m) => this.roles.get(m) === "Leader").length;
    this.maxSeen.acting = Math.max(this.maxSeen.acting, this.acting.size);
    this.maxSeen.leadersActing = Math.max(this.maxSeen.leadersActing, leadersActing);
    if (this.acting.size > budget)
      this.violate(`${this.acting.size} machines down > budget ${budget}`);
    if (leadersActing > 1) this.violate(`${leadersActing} leaders down at once`);
    try {
      await patchMachineStatus(name, { step: "Updating", updateStage: "Draining" });
      const [lo, hi] = this.opts.downMs ?? [100, 400];
      if (this.opts.silentWhileRebooting) this.opts.heartbeats?.silent.add(name);
      await (this.opts.downUntil?.(name) ?? sleepMs(lo + this.random() * (hi - lo)));
      this.opts.heartbeats?.silent.delete(name);
      // Back: running V2 and Ready. It stops counting itself down BEFORE it says so, as a
      // real machine is up again before its agent writes.
      this.acting.delete(name);
      this.done.add(name);
      await writeStatus(name, backFromTrial(this.opts.failTrial?.has(name) ?? false));
    } catch (e) {
      this.acting.delete(name);
      this.violate(`machine ${name} failed to play its turn: ${String(e)}`);
    }
  }
}

/** The status of a machine back from its trial of V2; a failed one fell back to V1 and says why. */
function backFromTrial(failed: boolean): Parameters<typeof writeStatus>[1] {
  return {
    version: failed ? V1 : V2,
    digest: failed ? D1 : D2,
    step: failed ? "Failed" : "Ready",
    target: { version: V2, digest: D2 },
    lastTrial: {
      version: V2,
      digest: D2,
      slot: "b",
      result: failed ? "Failed" : "Succeeded",
      at: now(),
      reason: failed ? "TrialFellBack" : "Promoted",
    },
  };
}

export function sleepMs(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

// ---------------------------------------------------------------------------------------
// A test's fleet in one call

/** What a test undoes when it ends, run last first by undo(). */
export type Cleanups = (() => Promise<unknown>)[];

/** Runs `cleanups` last first, one at a time, and empties the list. */
export async function undo(cleanups: Cleanups): Promise<void> {
  for (const c of cleanups.splice(0).reverse()) await c();
}

/**
 * A test file's cleanups on the shared control plane: liken's namespaces are made before its
 * first test, and what its tests push is undone after each test (`"each"`) or once the file's
 * tests are done (`"all"`).
 */
export function fileCleanups(after: "each" | "all"): Cleanups {
  const cleanups: Cleanups = [];
  beforeAll(ensureNamespaces, 120_000);
  if (after === "each") afterEach(() => undo(cleanups));
  else afterAll(() => undo(cleanups), 120_000);
  return cleanups;
}

export interface FleetOnServer {
  names: string[];
  beats: Heartbeats;
}

/**
 * The Cluster `cluster` (options as createCluster) and the Machines of `plans` on V1, Ready,
 * each renewing its heartbeat every `beatEveryMs` (Heartbeats' default unless given). Each
 * piece is undone through `cleanups`: the heartbeats stop, then the objects go.
 */
export async function fleetOnServer(
  cleanups: Cleanups,
  cluster: string,
  plans: MachinePlan[],
  opts: { cluster?: Parameters<typeof createCluster>[1]; beatEveryMs?: number } = {},
): Promise<FleetOnServer> {
  const names = plans.map((p) => p.name);
  cleanups.push(() => deleteAll(cluster, names));
  await createCluster(cluster, opts.cluster);
  for (const p of plans) await createMachine(cluster, p);
  const beats = new Heartbeats(cluster, names, opts.beatEveryMs);
  await beats.start();
  cleanups.push(async () => beats.stop());
  return { names, beats };
}

/**
 * fleetOnServer, and the played Fleet (SimOptions `sim`, with these heartbeats) watching the
 * Cluster; it stops first through `cleanups`.
 */
export async function playFleet(
  cleanups: Cleanups,
  cluster: string,
  plans: MachinePlan[],
  opts: {
    cluster?: Parameters<typeof createCluster>[1];
    beatEveryMs?: number;
    sim?: Omit<SimOptions, "heartbeats">;
  } = {},
): Promise<FleetOnServer & { fleet: Fleet }> {
  const onServer = await fleetOnServer(cleanups, cluster, plans, opts);
  const fleet = new Fleet(cluster, plans, { ...opts.sim, heartbeats: onServer.beats });
  await fleet.start();
  cleanups.push(() => fleet.stop());
  return { ...onServer, fleet };
}

/** The Events the operator recorded on the Cluster `cluster` (namespace default). */
export async function clusterEvents(cluster: string): Promise<EventSeen[]> {
  return eventsWhere(`involvedObject.name=${cluster}`);
}

/** A kubeconfig file path for CLI runs (the admin one). */
export function adminKubeconfig(): string {
  return kubeconfigPath();
}

export { tempDir } from "../support/temp-dir.js";

export function writeChannel(dir: string, versions: string[]): void {
  const body = [
    "apiVersion: liken.sh/v1alpha1",
    "kind: Channel",
    "versions:",
    ...versions.flatMap((v, i) => [
      `  - version: "${v}"`,
      `    digest: sha256:${String(i % 10).repeat(64)}`,
    ]),
  ].join("\n");
  writeFileSync(path.join(dir, "channel.yaml"), `${body}\n`);
}
