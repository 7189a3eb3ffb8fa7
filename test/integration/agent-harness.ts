// The fleet harness of the agent's integration tests: releases in a real channel served on an
// ephemeral port, a Cluster and kwok Nodes on the real control plane, simulated machines
// (src/lab/machine.ts: the real `liken agent run`, file-backed slots, the firmware model),
// a stand-in for cluster-operator that follows the turn protocol of docs/agent.md, and an
// independent recorder of every Machine and Cluster status the API server sends.
import { closeSync, openSync } from "node:fs";
import { mkdtemp, mkdir, readFile, rm, writeFile } from "node:fs/promises";
import { connect, createServer, type AddressInfo, type Server, type Socket } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { spawn, type ChildProcess } from "node:child_process";
import { LikenApi } from "../../src/api/client.js";
import { ResourceWatcher } from "../../src/api/watch.js";
import type { Cluster, Machine, RebootTurn, ReleaseRef } from "../../src/api/types.js";
import { buildRelease } from "../../src/release/build.js";
import { serveChannel, type ChannelServer } from "../../src/release/serve.js";
import { SimulatedMachine } from "../../src/lab/machine.js";
import { filler } from "../../src/lab/releases.js";
import type { AgentYaml } from "../../src/agent/config-schema.js";
import type { HealthCommand } from "../../src/agent/health.js";
import type { Timeouts } from "../../src/agent/steps.js";
import {
  createKwokNode,
  kubeConfig,
  kubeconfigPath,
  kubectl,
  uniqueName,
  waitFor,
} from "../support/kube.js";
import { likenEntry } from "../../src/cli/entry.js";
import { freePort } from "../../src/controlplane/ports.js";
import { REPO_ROOT as REPO } from "../../src/controlplane/paths.js";
import { EVICTION_PATH } from "../../src/operator/webhook/names.js";

export interface Observation {
  at: number;
  kind: "Machine" | "Cluster";
  name: string;
  step?: string;
  stage?: string;
  version?: string;
  turnRequest?: string;
  turns?: string[];
  object: Machine | Cluster;
}

export async function makeRelease(
  dir: string,
  channel: string,
  version: string,
): Promise<ReleaseRef> {
  const src = path.join(dir, "src", version);
  await mkdir(src, { recursive: true });
  await writeFile(path.join(src, "kernel"), filler(`kernel ${version}`, 64 * 1024));
  await writeFile(path.join(src, "rootfs"), filler(`rootfs ${version}`, 192 * 1024));
  const built = await buildRelease({
    version,
    out: channel,
    artifacts: [
      { name: "kernel", file: path.join(src, "kernel") },
      { name: "rootfs", file: path.join(src, "rootfs") },
    ],
  });
  return { version, digest: built.digest };
}

export interface FleetMachine {
  name: string;
  role: "Leader" | "Worker";
  rebootPolicy: "Auto" | "Manual";
  /** agent.yaml health.commands: host checks of its trial boots. */
  healthCommands?: HealthCommand[];
  /** Bytes per slot file (sparse); default 1 MiB, room for the fleet's releases. */
  slotSize?: number;
  /** More agent.yaml fields (role, rebootPolicy: what the agent registers its Machine with). */
  agentYaml?: Partial<AgentYaml>;
}

export class Fleet {
  readonly api = new LikenApi(kubeConfig(), "agent-test");
  readonly history: Observation[] = [];
  readonly machines = new Map<string, SimulatedMachine>();
  readonly cluster = uniqueName("agent-fleet");
  readonly releases: ReleaseRef[] = [];
  dir = "";
  channelDir = "";
  channel: ChannelServer | undefined;
  private watchers: ResourceWatcher<Machine | Cluster>[] = [];
  private operatorTimer: NodeJS.Timeout | undefined;
  private operatorBusy = false;
  private operator: ChildProcess | undefined;
  private operatorExit: Promise<void> | undefined;
  private stopping = false;
  /** How the real operator ended, when it ended before stop() (a test then fails at once). */
  private operatorEnded: string | undefined;
  /** Every error the stand-in operator met (conflicts are expected and retried). */
  readonly operatorErrors: string[] = [];

  /**
   * `spec` adds to the Cluster's spec: the agent's own tests that let several machines fail
   * one release turn the failure brake off (`rollout: {maxFailedTrials: 0}`).
   */
  async start(versions: string[], spec: Partial<Cluster["spec"]> = {}): Promise<void> {
    this.dir = await mkdtemp(path.join(tmpdir(), "liken-agent-fleet-"));
    this.channelDir = path.join(this.dir, "channel");
    for (const v of versions) this.releases.push(await makeRelease(this.dir, this.channelDir, v));
    this.channel = await serveChannel(this.channelDir);
    await kubectl(["create", "namespace", "liken-heartbeats"]);
    await kubectl(["create", "namespace", "liken-system"]); // the operator's webhook Secret
    const first = this.releases[0]!;
    await this.api.clusters.create({
      apiVersion: "liken.sh/v1alpha1",
      kind: "Cluster",
      metadata: { name: this.cluster },
      spec: {
        version: first.version,
        releases: { source: this.channel.url, catalog: this.releases },
        disruption: { maxUnavailable: 1 },
        ...spec,
      },
    });
    await this.watch();
  }

  private record(kind: Observation["kind"], o: Machine | Cluster): void {
    if (kind === "Machine") {
      const m = o as Machine;
      if (!this.machines.has(m.metadata.name)) return;
      this.history.push({
        at: Date.now(),
        kind,
        name: m.metadata.name,
        ...(m.status?.step ? { step: m.status.step } : {}),
        ...(m.status?.updateStage ? { stage: m.status.updateStage } : {}),
        ...(m.status?.version ? { version: m.status.version } : {}),
        ...(m.status?.turnRequest ? { turnRequest: m.status.turnRequest.version } : {}),
        object: m,
      });
    } else {
      const c = o as Cluster;
      if (c.metadata.name !== this.cluster) return;
      this.history.push({
        at: Date.now(),
        kind,
        name: c.metadata.name,
        turns: (c.status?.rebootTurns ?? []).map((t) => t.machine),
        object: c,
      });
    }
  }

  private async watch(): Promise<void> {
    const mw = new ResourceWatcher(this.api.machines, {
      onChange: (e) => this.record("Machine", e.object),
    });
    const cw = new ResourceWatcher(this.api.clusters, {
      onChange: (e) => this.record("Cluster", e.object),
    });
    this.watchers = [
      mw as ResourceWatcher<Machine | Cluster>,
      cw as ResourceWatcher<Machine | Cluster>,
    ];
    await Promise.all([mw.start(), cw.start()]);
  }

  async addMachine(
    m: FleetMachine,
    timeouts: Partial<Timeouts> = {},
    kubeconfig = kubeconfigPath(),
    /** The bootstrap credential alone: the machine joins for its own certificate. */
    bootstrapKubeconfig?: string,
  ): Promise<SimulatedMachine> {
    await createKwokNode(m.name);
    await this.api.machines.create({
      apiVersion: "liken.sh/v1alpha1",
      kind: "Machine",
      metadata: { name: m.name },
      spec: { cluster: this.cluster, nodeName: m.name, role: m.role, rebootPolicy: m.rebootPolicy },
    });
    const sim = new SimulatedMachine({
      name: m.name,
      dir: path.join(this.dir, m.name),
      cluster: this.cluster,
      ...(bootstrapKubeconfig === undefined ? { kubeconfig } : { bootstrapKubeconfig }),
      // The stand-in kubelet writes the Node's status as a kubelet does, with an identity of its
      // own (the admin's here), whatever the agent's identity may do.
      kubeletKubeconfig: kubeconfigPath(),
      slotSize: m.slotSize ?? 1024 * 1024,
      loopSeconds: 0.5,
      heartbeatSeconds: 5,
      hangResetMs: 300,
      timeouts: { downloadRetryMs: 2_000, drainMs: 30_000, proveMs: 8_000, ...timeouts },
      ...(m.healthCommands ? { healthCommands: m.healthCommands } : {}),
      ...(m.agentYaml ? { agentYaml: m.agentYaml } : {}),
    });
    this.machines.set(m.name, sim);
    await sim.create();
    const first = this.releases[0]!;
    await sim.install(this.channel!.url, first.version, first.digest);
    return sim;
  }

  powerOnAll(): void {
    for (const m of this.machines.values()) m.powerOn();
  }

  async setTarget(r: ReleaseRef): Promise<void> {
    await this.api.clusters.patch(this.cluster, { spec: { version: r.version } });
  }

  /**
   * The turn protocol as docs/agent.md states it, standing in for cluster-operator: grant a
   * machine that asks (status.turnRequest) a turn within maxUnavailable 1 (so also one leader
   * at a time), recorded in status.rebootTurns with a write conditioned on the Cluster's
   * resourceVersion; remove the record once the machine no longer asks for that release.
   */
  /**
   * The real cluster-operator (`liken operator`) as its own process, with the start-up grace
   * shortened (the page's 40 s is the operator's own test's business). `extraArgs` come last,
   * so a test may set a flag given here again (e.g. --turn-deadline, --metrics-address).
   */
  async startRealOperator(extraArgs: string[] = []): Promise<void> {
    // It serves the eviction check as in the lab: by URL, since the API server runs on loopback.
    await kubectl(["apply", "-f", path.join(REPO, "config", "webhook")]);
    const port = await freePort();
    const args = [
      likenEntry(),
      "operator",
      "--kubeconfig",
      kubeconfigPath(),
      "--start-grace",
      "1s",
      "--webhook-listen",
      `127.0.0.1:${port}`,
      "--webhook-url",
      `https://127.0.0.1:${port}${EVICTION_PATH}`,
    ];
    args.push("--identity", "agent-test-operator", "--no-leader-elect", "--turn-deadline", "10m");
    // Parallel test files each run an operator: never the default :8080.
    args.push("--metrics-address", "127.0.0.1:0", ...extraArgs);
    // Its log is kept in the fleet's directory: a test that waits on it in vain names its tail.
    const log = openSync(this.operatorLog(), "a");
    this.operator = spawn(process.execPath, args, { stdio: ["ignore", log, log] });
    closeSync(log);
    this.operatorExit = new Promise((resolve) =>
      this.operator!.on("exit", (code, signal) => {
        if (!this.stopping) this.operatorEnded = `exited (code ${code}, signal ${signal})`;
        resolve();
      }),
    );
  }

  /** Where the real operator's output goes. */
  operatorLog(): string {
    return path.join(this.dir, "operator.log");
  }

  /**
   * Throws when the real operator ended before stop(): a wait on its work would otherwise run
   * out its whole deadline and say only "timed out".
   */
  async assertOperatorRuns(): Promise<void> {
    if (this.operatorEnded === undefined) return;
    throw new Error(
      `the real operator ${this.operatorEnded}; the end of ${this.operatorLog()}:\n${await this.operatorLogTail()}`,
    );
  }

  /** The last lines of the real operator's log (empty when it has none). */
  async operatorLogTail(lines = 30): Promise<string> {
    const text = await readFile(this.operatorLog(), "utf8").catch(() => "");
    return text.trimEnd().split("\n").slice(-lines).join("\n");
  }

  startOperatorStandIn(intervalMs = 300): void {
    this.operatorTimer = setInterval(() => {
      if (this.operatorBusy) return;
      this.operatorBusy = true;
      this.operatorRound()
        .catch((e: unknown) => this.operatorErrors.push(String(e)))
        .finally(() => (this.operatorBusy = false));
    }, intervalMs);
  }

  private async operatorRound(): Promise<void> {
    const machines = (await this.api.machines.list()).items.filter((m) =>
      this.machines.has(m.metadata.name),
    );
    await this.api.clusters.updateStatus(this.cluster, (c) => {
      const turns = c.status?.rebootTurns ?? [];
      const keep = turns.filter((t) => {
        const m = machines.find((x) => x.metadata.name === t.machine);
        return m?.status?.turnRequest?.version === t.version;
      });
      const next: RebootTurn[] = [...keep];
      if (next.length === 0) {
        const asking = machines
          .filter((m) => m.status?.turnRequest !== undefined)
          .sort((a, b) => (a.status!.turnRequest!.at < b.status!.turnRequest!.at ? -1 : 1))[0];
        if (asking) {
          const tr = asking.status!.turnRequest!;
          next.push({
            machine: asking.metadata.name,
            grantedAt: new Date().toISOString().replace(/\.\d+Z$/, "Z"),
            grantedBy: "agent-test",
            leader: asking.spec.role === "Leader",
            version: tr.version,
            digest: tr.digest!,
          });
        }
      }
      if (JSON.stringify(next) === JSON.stringify(turns)) return undefined;
      return { ...c, status: { ...c.status, rebootTurns: next } };
    });
  }

  machineHistory(name: string): Observation[] {
    return this.history.filter((h) => h.kind === "Machine" && h.name === name);
  }

  async waitAll(what: string, probe: (m: Machine) => boolean, timeoutMs = 90_000): Promise<void> {
    let last = "";
    try {
      await waitFor(
        what,
        async () => {
          const ms = (await this.api.machines.list()).items.filter((m) =>
            this.machines.has(m.metadata.name),
          );
          last = ms
            .map(
              (m) =>
                `${m.metadata.name}:${m.status?.step}/${m.status?.updateStage ?? ""}/${m.status?.version}`,
            )
            .join(" ");
          const bad = ms.filter((m) => !probe(m));
          return bad.length === 0 && ms.length === this.machines.size ? true : undefined;
        },
        { timeoutMs, intervalMs: 300 },
      );
    } catch (e) {
      throw new Error(`${(e as Error).message}; machines: ${last}`, { cause: e });
    }
  }

  async stop(): Promise<void> {
    clearInterval(this.operatorTimer);
    this.stopping = true;
    this.operator?.kill("SIGTERM");
    await this.operatorExit;
    await Promise.all([...this.machines.values()].map((m) => m.stop()));
    for (const w of this.watchers) w.stop();
    await this.channel?.close();
    if (process.env.LIKEN_KEEP_TEST_DIRS === undefined)
      await rm(this.dir, { recursive: true, force: true });
  }
}

/**
 * Invariants over the recorded history, checked by reading only API objects:
 *  - a machine shows updateStage Rebooting or Proving only while the latest Cluster seen before
 *    it holds a turn record for that machine;
 *  - the Cluster never holds records for two leaders (nor, with maxUnavailable 1, two machines).
 */
export function checkTurnInvariants(history: Observation[], leaders: Set<string>): string[] {
  const problems: string[] = [];
  let turns: string[] = [];
  for (const h of history) {
    if (h.kind === "Cluster") {
      turns = h.turns ?? [];
      if (turns.filter((t) => leaders.has(t)).length > 1)
        problems.push(`two leaders hold turns: ${turns.join(",")}`);
      if (turns.length > 1) problems.push(`more turns than maxUnavailable 1: ${turns.join(",")}`);
    } else if ((h.stage === "Rebooting" || h.stage === "Proving") && h.step === "Updating") {
      if (!turns.includes(h.name)) problems.push(`${h.name} in ${h.stage} without a recorded turn`);
    }
  }
  return problems;
}

/** A TCP proxy in front of the API server that a test can cut and restore (an outage). */
export class ApiProxy {
  private server: Server | undefined;
  private readonly sockets = new Set<Socket>();
  port = 0;

  constructor(private readonly target: URL) {}

  async open(): Promise<void> {
    const server = createServer((down) => {
      const up = connect(Number(this.target.port), this.target.hostname);
      for (const s of [down, up]) {
        this.sockets.add(s);
        s.on("close", () => this.sockets.delete(s));
        s.on("error", () => s.destroy());
      }
      down.pipe(up).pipe(down);
    });
    await new Promise<void>((resolve) => server.listen(this.port, "127.0.0.1", resolve));
    this.port = (server.address() as AddressInfo).port;
    this.server = server;
  }

  /** Refuses new connections and drops every open one. */
  async cut(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  }

  /** A kubeconfig like `base` whose server is this proxy. */
  async kubeconfig(base: string, file: string): Promise<string> {
    const text = await readFile(base, "utf8");
    await writeFile(file, text.replace(/server: \S+/g, `server: https://127.0.0.1:${this.port}`));
    return file;
  }
}
