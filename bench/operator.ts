// bench:operator — cluster-operator rolling 1,000 Machines (`-- --machines 5000`: a cluster's
// supported maximum of nodes) on a real API server.
//
// A private control plane (etcd + kube-apiserver, built by `npm run cluster`) holds one
// Cluster with maxUnavailable 10% and 1,000 Machines with heartbeat Leases. Three processes
// besides the control plane:
//   - `liken operator`, from the CLI bundle (compiled JS, as in its image) with the chart's
//     default heap cap (values.yaml heapMiB as --max-old-space-size);
//   - the agent simulator (operator-agents.ts), one child process playing every agent: its
//     heartbeats and, on each turn, an Updating write, PER_MACHINE_MS, a Ready write; each write
//     one PUT from the object it last wrote, over one kept-alive connection pool;
//   - this process, which only creates the fleet, watches the Cluster and times the grants: its
//     event loop waits for no agent's work, so its timestamps are the turn's arrival.
// Measured:
//   grant latency  from the moment a slot could be granted (the simulator's Ready write about to
//                  go out, or the first machine's Ready on V2 that lifts the failure brake's
//                  one-at-a-time, or the grace's end) to the turn seen in the Cluster status
//                  here; p99 over every grant;
//   where it goes  beside it, p99 each: the Ready write's answer (the API server, as the agents
//                  saw it), the operator's wait from a Cluster's first event to its pass, a pass
//                  (decide and its status write), decide alone, the status write alone (its stats);
//                  what is left is the watch events' way to the operator and back, and the
//                  queue for the cores;
//   requests/turn  the operator's own API requests (status writes, Lost marks, Events,
//                  re-reads after 409) per turn, from its exit stats;
//   CPU per turn   of the operator, of the API server + etcd, of the simulator and of this
//                  process (/proc utime + stime) over the rollout: CPU seconds are far less
//                  sensitive to the machine's load than latencies, and say whose cores a wave
//                  takes;
//   decide p99     the operator's own decide() time, p99 over its last 4,096 decisions (its exit
//                  stats; liken_operator_decide_seconds is the same figure as a histogram): wall
//                  time, so a loaded machine's waits for a core are in it; beside it decide's CPU
//                  (the operator process's, around each call: its GC threads' too), which the
//                  load does not move;
//   RSS, heap      peak RSS of the operator process (VmHWM, /proc), also as it stood at the end
//                  of its start-up, and the peak of the V8 heap in use (sampled each second by
//                  the operator, in its exit stats);
//   overhead       the rollout's total time against the ideal: the first machine alone (the
//                  failure brake's default lets one machine try a release nobody has proved),
//                  then ceil((N - 1) / budget) rounds, each of the per-machine time;
//   idle cost      before the rollout, the API server's and etcd's CPU while the N machines
//                  only keep their heartbeat Leases (one write per machine every 15 s), against
//                  the same fleet renewing at a kubelet's node-Lease rate (every 10 s, the
//                  kubelet's default renewal: a quarter of its 40 s lease duration), each
//                  measured over IDLE_MS in this run: what liken adds to a fleet's steady state
//                  next to what its kubelets already cost.
// Not measured, or measured with the bench's own cost in it:
//   - every process shares the machine's cores: the simulator's 333 Lease writes a second at
//     5,000 machines and its status writes (at most 32 in flight) load the API server and etcd
//     as a real fleet's agents would, and their CPU is reported, not removed. A freed slot is
//     timed when its Ready write goes out (after the simulator's own queue of writes, which 500
//     separate machines would not have), so that queue is not in the grant latency;
//   - on a loaded machine the heartbeats fall behind and the operator reads machines Lost (as it
//     must): BENCH_OPERATOR_LOST_AFTER raises its threshold for such runs, and the log counts
//     the heartbeats skipped;
//   - a real drain, reboot and trial (PER_MACHINE_MS stands for them).
// Goals (issues 28, 43): grant p99 < 1 s, at most 3 API writes per turn, overhead <= 1.05,
// RSS <= 256 MiB, decide p99 < 50 ms.
// Last line: operator: machines=N grant-p99=<ms> writes-per-turn=<n> requests-per-turn=<n> rss=<MiB> heap=<MiB> cpu-ms-per-turn=<ms> apiserver-cpu-ms-per-turn=<ms> decide-p99=<ms> decide-cpu-p99=<ms> pass-wait-p99=<ms> ready-write-p99=<ms> overhead-vs-ideal=<ratio> idle-apiserver-vs-kubelet-lease=<ratio> goals=met|missed(<each goal missed with its figure>)
// Each goal missed says, from this run's own figures, what it is made of: a grant's p99 by stage
// (the Ready write's answer, the operator's wait for its pass, decide, the status write) with the largest named
// and each process's CPU per turn and the load; decide's CPU beside its wall time; the writes by
// kind; the heap beside the RSS; the rollout's time over the ideal per round.
import { fork, spawn, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import { loadavg } from "node:os";
import { parse } from "yaml";
import path from "node:path";
import { execFile } from "node:child_process";
import { parseArgs, promisify } from "node:util";
import { loadRestConfig, Rest } from "../src/api/rest.js";
import { RestResource } from "../src/api/rest-resource.js";
import {
  HEARTBEAT_NAMESPACE,
  LABEL_CLUSTER,
  LABEL_MACHINE,
  LikenApi,
  loadKubeConfig,
  ResourceWatcher,
  type Cluster,
} from "../src/api/index.js";
import { ensureBinaries } from "../src/controlplane/build.js";
import { down, up } from "../src/controlplane/instance.js";
import { REPO_ROOT } from "../src/controlplane/paths.js";
import { useCliBundle } from "../src/cli/entry.js";

const { values: args } = parseArgs({
  options: { machines: { type: "string" } },
  strict: true,
});
const N = Number(args.machines ?? process.env.BENCH_MACHINES ?? 1000);
if (!Number.isInteger(N) || N < 10 || N > 99_999) {
  throw new Error(
    `bench: --machines ${args.machines ?? ""} must be a whole number from 10 to 99999`,
  );
}
const BUDGET = "10%";
const BUDGET_N = Math.max(1, Math.ceil(N / 10));
/**
 * Per-machine time on its turn (drain + reboot + prove). On a real fleet it is minutes; 20 s
 * scales it down ~10x and keeps the turn's fixed cost (a Ready report, the operator's watch,
 * decision and status write, the machine's watch: ~0.3-0.8 s on this 2-core machine that also
 * runs the API server, etcd and 1,000 agents' heartbeats) in proportion. BENCH_PER_MACHINE_MS=4000
 * magnifies that fixed cost fivefold.
 */
const PER_MACHINE_MS = Number(process.env.BENCH_PER_MACHINE_MS ?? 20_000);
const HEARTBEAT_MS = 15_000;
/**
 * BENCH_OPERATOR_LOST_AFTER: the operator's --lost-after (default the page's 40 s). One process
 * plays every heartbeat (333 Lease writes a second at 5,000 machines); on a machine loaded by
 * other work it falls behind, the operator rightly reads its machines Lost, and the rollout
 * stalls on the bench's own lateness. A longer threshold keeps that out of the figures; the
 * operator still receives and judges every renewal.
 */
const LOST_AFTER = process.env.BENCH_OPERATOR_LOST_AFTER;
/** A kubelet renews its node Lease every 10 s by default (renewInterval: 25 % of 40 s). */
const KUBELET_LEASE_MS = 10_000;
/** How long each idle rate is measured; two heartbeat periods and a half of liken's. */
const IDLE_MS = Number(process.env.BENCH_IDLE_MS ?? 40_000);
const CONCURRENCY = 32;
const V1 = "2026.10.10-001";
const V2 = "2026.10.12-001";
const D1 = `sha256:${"1".repeat(64)}`;
const D2 = `sha256:${"2".repeat(64)}`;
const run = promisify(execFile);
/** A Lease as this bench writes it (plain JSON over the lean client). */
interface BenchLease {
  apiVersion: string;
  kind: string;
  metadata: { name: string; resourceVersion?: string; labels?: Record<string, string> };
  spec: { holderIdentity: string; leaseDurationSeconds: number; renewTime: string };
}

/** A MicroTime: the API server parses exactly six fractional digits. */
const microTime = (ms: number): string => new Date(ms).toISOString().replace(/Z$/, "000Z");

const log = (l: string): void => void process.stderr.write(`${l}\n`);
const iso = (): string => new Date().toISOString().replace(/\.\d+Z$/, "Z");

async function pool<T>(items: T[], fn: (t: T) => Promise<unknown>): Promise<void> {
  let i = 0;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (i < items.length) await fn(items[i++]!);
    }),
  );
}

function percentile(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)] ?? NaN;
}

function procStats(pid: number): { cpuMs: number; peakRssMiB: number } {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
  const ticks = Number(stat[11]) + Number(stat[12]); // utime + stime (fields 14, 15)
  const hwm = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1];
  return { cpuMs: (ticks * 1000) / 100, peakRssMiB: Number(hwm ?? 0) / 1024 };
}

async function main(): Promise<void> {
  await ensureBinaries(log);
  const name = `bench-operator-${process.pid}`;
  const cp = await up({ name, ownerPid: process.pid, log });
  try {
    const apiPids = cp.processes
      .filter((p) => p.name === "kube-apiserver" || p.name === "etcd")
      .map((p) => p.pid);
    await bench(cp.kubeconfig, cp.binDir, apiPids);
  } finally {
    await down(name);
  }
}

/** CPU ms of the API server and etcd, together (/proc). */
function apiCpuMs(pids: readonly number[]): number {
  return pids.reduce((sum, pid) => sum + procStats(pid).cpuMs, 0);
}

async function bench(kubeconfig: string, binDir: string, apiPids: number[]): Promise<void> {
  const kubectl = path.join(binDir, "kubectl");
  const env = { ...process.env, KUBECONFIG: kubeconfig };
  await run(kubectl, ["apply", "--server-side", "-f", path.join(REPO_ROOT, "config/crd")], { env });
  await run(kubectl, ["wait", "--for=condition=Established", "crd", "--all", "--timeout=60s"], {
    env,
  });
  await run(kubectl, ["create", "namespace", HEARTBEAT_NAMESPACE], { env });
  await run(kubectl, ["create", "namespace", "liken-system"], { env });
  const kc = loadKubeConfig(kubeconfig);
  const api = new LikenApi(kc, "bench");
  // The Leases are made with the lean client the agents use (rest.ts).
  const rest = new Rest(loadRestConfig(kubeconfig), "liken-bench");
  const leaseApi = new RestResource<BenchLease>(
    rest,
    "Lease",
    `/apis/coordination.k8s.io/v1/namespaces/${HEARTBEAT_NAMESPACE}/leases`,
    "bench",
  );
  const cluster = "bench";
  await api.clusters.create({
    apiVersion: "liken.sh/v1alpha1",
    kind: "Cluster",
    metadata: { name: cluster },
    spec: {
      version: V2,
      releases: {
        source: "http://127.0.0.1:9/",
        catalog: [
          { version: V1, digest: D1 },
          { version: V2, digest: D2 },
        ],
      },
      disruption: { maxUnavailable: BUDGET },
    },
  });
  const width = String(N - 1).length;
  const names = Array.from({ length: N }, (_, i) => `m-${String(i).padStart(width, "0")}`);
  const leaders = new Set(names.slice(0, 3));
  const t0 = Date.now();
  await pool(names, async (m) => {
    const created = await api.machines.create({
      apiVersion: "liken.sh/v1alpha1",
      kind: "Machine",
      metadata: { name: m, labels: { [LABEL_CLUSTER]: cluster } },
      spec: {
        cluster,
        nodeName: m,
        role: leaders.has(m) ? "Leader" : "Worker",
        rebootPolicy: "Auto",
      },
    });
    // Staged and asking from the start: the operator's start-up grace holds every request,
    // so the whole fleet asks at the same instant, the moment granting begins.
    const at = iso();
    await api.machines.replaceStatus({
      ...created,
      status: {
        version: V1,
        digest: D1,
        step: "UpdatePending",
        staged: { version: V2, digest: D2, slot: "b", at },
        turnRequest: { version: V2, digest: D2, at },
      },
    });
    await leaseApi.create({
      apiVersion: "coordination.k8s.io/v1",
      kind: "Lease",
      metadata: { name: m, labels: { [LABEL_CLUSTER]: cluster, [LABEL_MACHINE]: m } },
      spec: { holderIdentity: m, leaseDurationSeconds: 40, renewTime: microTime(Date.now()) },
    });
  });
  log(`bench: ${N} Machines and Leases created in ${((Date.now() - t0) / 1000).toFixed(1)} s`);

  // The agents: one child process (operator-agents.ts) plays every machine; this process only
  // watches the Cluster and times the grants, so its timestamps wait for no agent's work.
  const agents = fork(
    path.join(REPO_ROOT, "bench/operator-agents.ts"),
    [
      "--kubeconfig",
      kubeconfig,
      "--machines",
      String(N),
      "--cluster",
      cluster,
      "--per-machine-ms",
      String(PER_MACHINE_MS),
      "--budget",
      String(BUDGET_N),
      "--v2",
      V2,
      "--d2",
      D2,
    ],
    { execArgv: ["--import", "tsx"], stdio: ["ignore", "inherit", "inherit", "ipc"] },
  );
  const freed: number[] = []; // times a slot became free, oldest first
  const readyWriteMs: number[] = [];
  let readyBack = 0;
  let lastReady = 0;
  let agentStats: Record<string, number> = {};
  let agentsReady = false;
  agents.on("message", (msg: AgentMessage) => {
    switch (msg.t) {
      case "ready":
        agentsReady = true;
        return;
      case "freed":
        for (let k = 0; k < msg.slots; k++) freed.push(msg.at);
        return;
      case "back":
        readyBack++;
        lastReady = Math.max(lastReady, msg.at);
        readyWriteMs.push(msg.writeMs);
        return;
      case "stats":
        agentStats = msg.stats;
        return;
    }
  });
  const agentsExited = new Promise((r) => agents.once("exit", r));
  try {
    await waitUntil(() => agentsReady, 120_000);
    await rollout(kubeconfig, apiPids, agents, {
      freed,
      readyWriteMs,
      readyBack: () => readyBack,
      lastReady: () => lastReady,
      agentStats: () => agentStats,
      agentsExited,
    });
  } finally {
    if (agents.exitCode === null) agents.kill("SIGTERM");
    await agentsExited;
  }
}

/** What the agent simulator says (operator-agents.ts). */
type AgentMessage =
  | { t: "ready" }
  | { t: "freed"; at: number; slots: number }
  | { t: "back"; at: number; writeMs: number }
  | { t: "stats"; stats: Record<string, number> };

interface AgentFeed {
  freed: number[];
  readyWriteMs: number[];
  readyBack: () => number;
  lastReady: () => number;
  agentStats: () => Record<string, number>;
  agentsExited: Promise<unknown>;
}

/** The chart's default heap cap (values.yaml heapMiB), which the operator runs under there. */
function chartHeapMiB(): number {
  const values = parse(
    readFileSync(path.join(REPO_ROOT, "deploy/helm/liken/values.yaml"), "utf8"),
  ) as { heapMiB?: number };
  if (typeof values.heapMiB !== "number") throw new Error("bench: values.yaml has no heapMiB");
  return values.heapMiB;
}

async function rollout(
  kubeconfig: string,
  apiPids: number[],
  agents: ChildProcess,
  feed: AgentFeed,
): Promise<void> {
  const beat = (periodMs: number | null): void => void agents.send({ t: "beat", periodMs });

  // The fleet at rest, before the operator starts: the API server's and etcd's CPU with no
  // heartbeat at all (their own floor: controllers, compaction), at liken's heartbeat rate, and
  // at a kubelet's Lease rate (the same write), each over IDLE_MS; a machine's cost is what it
  // adds to the floor.
  const idleCost = async (ms: number | null): Promise<number> => {
    beat(ms);
    await new Promise((r) => setTimeout(r, ms ?? 5000)); // settle at the new rate first
    const c0 = apiCpuMs(apiPids);
    await new Promise((r) => setTimeout(r, IDLE_MS));
    return (apiCpuMs(apiPids) - c0) / (IDLE_MS / 1000); // CPU ms per second
  };
  const floor = await idleCost(null);
  const likenIdle = (await idleCost(HEARTBEAT_MS)) - floor;
  const kubeletIdle = (await idleCost(KUBELET_LEASE_MS)) - floor;
  beat(HEARTBEAT_MS);
  const perMachineUs = (cpuMsPerS: number): string => ((cpuMsPerS * 1000) / N).toFixed(1);
  log(
    `bench: idle API server + etcd CPU over a floor of ${floor.toFixed(0)} ms/s: liken's heartbeats add ${likenIdle.toFixed(0)} ms/s (${perMachineUs(likenIdle)} us/s per machine), a kubelet's Lease rate ${kubeletIdle.toFixed(0)} ms/s (${perMachineUs(kubeletIdle)} us/s per machine)`,
  );

  // The operator runs compiled JavaScript, as in its container image: one bundle of the CLI
  // (from a source checkout bin/liken.js would compile TypeScript inside the measured process),
  // with the chart's default heap cap. BENCH_OPERATOR_ENTRY: a bundle built before (another
  // commit's operator, for a comparison in the same conditions: two benches side by side).
  const entry = process.env.BENCH_OPERATOR_ENTRY ?? (await useCliBundle());
  const heapCap = `--max-old-space-size=${chartHeapMiB()}`;
  const nodeOptions = process.env.BENCH_OPERATOR_NODE_OPTIONS?.split(" ").filter(Boolean) ?? [];
  log(`bench: the operator runs with ${[heapCap, ...nodeOptions].join(" ")}`);
  const op = spawn(
    process.execPath,
    [
      heapCap,
      ...nodeOptions,
      entry,
      "operator",
      "--kubeconfig",
      kubeconfig,
      "--identity",
      "bench-op",
      "--start-grace",
      "1s",
      "--no-leader-elect",
      "--metrics-address",
      "off",
      ...(LOST_AFTER === undefined ? [] : ["--lost-after", LOST_AFTER]),
    ],
    { cwd: REPO_ROOT, stdio: ["ignore", "ignore", "pipe"] },
  );
  let opLog = "";
  op.stderr.on("data", (b: Buffer) => (opLog += b.toString()));
  await waitUntil(() => opLog.includes("cluster-operator started"), 120_000);
  const startedLine = opLog.split("\n").find((l) => l.includes("cluster-operator started")) ?? "";
  const grantsFrom = (JSON.parse(startedLine) as { grantsFromMs: number }).grantsFromMs;
  // The peak so far is the start-up's: the first lists of every Machine and Lease.
  const startupRssMiB = procStats(op.pid!).peakRssMiB;

  // A grant is timed from the oldest slot freed and not yet matched to the moment its turn is
  // seen here, on this process's own watch of the Cluster (this process does nothing else).
  const { freed } = feed;
  const grants: { ms: number; at: number; machine: string }[] = [];
  const seenTurn = new Set<string>();
  let maxTurns = 0;
  const kc = loadKubeConfig(kubeconfig);
  const api = new LikenApi(kc, "bench");
  const watcher = new ResourceWatcher<Cluster>(api.clusters, {
    onChange: (ev) => {
      const turns = ev.object.status?.rebootTurns ?? [];
      maxTurns = Math.max(maxTurns, turns.length);
      const seen = Date.now();
      for (const t of turns) {
        if (seenTurn.has(t.machine)) continue;
        seenTurn.add(t.machine);
        const from = freed.shift();
        if (from !== undefined) grants.push({ ms: seen - from, at: seen, machine: t.machine });
      }
    },
  });
  await watcher.start();
  agents.send({ t: "act" });

  const cpu0 = procStats(op.pid!);
  const api0 = apiCpuMs(apiPids);
  const agents0 = procStats(agents.pid!).cpuMs;
  const self0 = process.cpuUsage();
  // Every machine asked before the operator started; granting begins when its grace ends, with
  // one turn: nobody has proved V2 yet (spec.rollout.maxFailedTrials 1 by default).
  const start = grantsFrom;
  freed.unshift(start);
  await waitUntil(() => feed.readyBack() === N, 30 * 60_000);
  const total = feed.lastReady() - start;
  const cpu1 = procStats(op.pid!);
  const apiRollMs = apiCpuMs(apiPids) - api0;
  const agentsRollMs = procStats(agents.pid!).cpuMs - agents0;
  const selfCpu = process.cpuUsage(self0);
  const selfRollMs = (selfCpu.user + selfCpu.system) / 1000;
  watcher.stop();
  agents.kill("SIGTERM");
  await feed.agentsExited;
  const agentStats = feed.agentStats();

  const exited = new Promise((r) => op.once("exit", r));
  op.kill("SIGTERM");
  await exited;
  const statsLine = opLog.split("\n").find((l) => l.includes('"cluster-operator stopped"'));
  const stats = (JSON.parse(statsLine ?? "{}") as { stats?: Record<string, number> }).stats ?? {};
  const turns = stats.grants ?? N;
  const writes = (stats.clusterWrites ?? 0) + (stats.machineWrites ?? 0) + (stats.events ?? 0);
  const requests = writes + (stats.reads ?? 0) + (stats.conflicts ?? 0);
  // spec.rollout.maxFailedTrials defaults to 1: one machine tries the unproven release alone.
  const ideal = (1 + Math.ceil((N - 1) / BUDGET_N)) * PER_MACHINE_MS;
  const latencies = grants.map((g) => g.ms);
  const p50 = percentile(latencies, 50);
  const p99 = percentile(latencies, 99);
  log(`bench: max turns held at once ${maxTurns} (budget ${BUDGET_N})`);
  log(
    `bench: agents: ${agentStats.beatsSent} heartbeats (p99 ${agentStats.beatP99Ms} ms), ${agentStats.beatsSkipped} skipped because the machine's last one was still on its way, ${agentStats.beatsFailed} failed; ${agentStats.statusWrites} status writes (p99 ${agentStats.statusWriteP99Ms} ms)`,
  );
  const worst = [...grants].sort((a, b) => b.ms - a.ms).slice(0, 15);
  log(
    `bench: slowest grants ${worst.map((w) => `${w.machine}:${w.ms}ms@${((w.at - start) / 1000).toFixed(1)}s`).join(" ")}`,
  );
  log(`bench: operator stats ${JSON.stringify(stats)}`);
  log(`bench: grant latency p50 ${p50} ms, p99 ${p99} ms over ${latencies.length} grants`);
  // Where a grant's time goes: the Ready write's answer (the API server, as the agents saw it),
  // the operator's wait for its pass and the pass itself (its status write's round trip in it),
  // and the rest (the watch events' way to the operator and back here, and the cores' queue).
  log(
    `bench: where a grant goes (p99 each): the Ready write answered in ${percentile(feed.readyWriteMs, 99).toFixed(0)} ms; in the operator an event waited ${stats.passWaitP99Ms} ms for its pass, a pass took ${stats.passP99Ms} ms (decide ${stats.decideP99Ms} ms, its status write ${stats.statusWriteP99Ms} ms)`,
  );
  const perTurn = (ms: number): string => (ms / turns).toFixed(1);
  log(
    `bench: CPU during the rollout, ms per turn: operator ${perTurn(cpu1.cpuMs - cpu0.cpuMs)}, API server + etcd ${perTurn(apiRollMs)}, agent simulator ${perTurn(agentsRollMs)}, this measuring process ${perTurn(selfRollMs)}; the machine's load average ${loadavg()
      .map((l) => l.toFixed(1))
      .join(" ")}`,
  );
  log(
    `bench: operator CPU ${((cpu1.cpuMs - cpu0.cpuMs) / 1000).toFixed(1)} s during the rollout (${((cpu1.cpuMs - cpu0.cpuMs) / Number(stats.reconciles)).toFixed(1)} ms per pass over ${stats.reconciles} passes), peak RSS ${cpu1.peakRssMiB.toFixed(0)} MiB (${startupRssMiB.toFixed(0)} MiB by the end of its start-up), peak heap ${stats.heapPeakMiB} MiB`,
  );
  log(
    `bench: rollout ${(total / 1000).toFixed(1)} s vs ideal (1 + ceil(${N - 1}/${BUDGET_N})) x ${PER_MACHINE_MS / 1000} s = ${(ideal / 1000).toFixed(1)} s`,
  );
  log(
    `bench: writes per turn ${(writes / turns).toFixed(2)} (status ${stats.clusterWrites}, Lost marks ${stats.machineWrites}, Events ${stats.events})`,
  );
  const goals = goalsMissed({
    p99,
    p50,
    turns,
    stats,
    readyWriteP99: percentile(feed.readyWriteMs, 99),
    cpuPerTurn: {
      operator: (cpu1.cpuMs - cpu0.cpuMs) / turns,
      api: apiRollMs / turns,
      agents: agentsRollMs / turns,
      self: selfRollMs / turns,
    },
    rssMiB: cpu1.peakRssMiB,
    startupRssMiB,
    totalMs: total,
    idealMs: ideal,
    rounds: 1 + Math.ceil((N - 1) / BUDGET_N),
    load: loadavg()[0]!,
  });
  log(`bench: goals ${goalsField(goals)}`);
  const cpuPerTurnMs = (cpu1.cpuMs - cpu0.cpuMs) / turns;
  process.stdout.write(
    `operator: machines=${N} grant-p99=${p99} writes-per-turn=${(writes / turns).toFixed(2)} requests-per-turn=${(requests / turns).toFixed(2)} rss=${cpu1.peakRssMiB.toFixed(0)} heap=${Number(stats.heapPeakMiB)} cpu-ms-per-turn=${cpuPerTurnMs.toFixed(1)} apiserver-cpu-ms-per-turn=${perTurn(apiRollMs)} decide-p99=${Number(stats.decideP99Ms)} decide-cpu-p99=${Number(stats.decideCpuP99Ms)} pass-wait-p99=${Number(stats.passWaitP99Ms)} ready-write-p99=${percentile(feed.readyWriteMs, 99).toFixed(0)} overhead-vs-ideal=${(total / ideal).toFixed(3)} idle-apiserver-vs-kubelet-lease=${(likenIdle / kubeletIdle).toFixed(2)} goals=${goalsField(goals)}\n`,
  );
}

/** The last line's goals field: met, or each goal missed with this run's figure. */
function goalsField(missed: readonly string[]): string {
  return missed.length === 0 ? "met" : `missed(${missed.join("; ")})`;
}

/** What one run measured that the goals are judged on, and their reasons drawn from. */
interface Measured {
  p99: number;
  p50: number;
  turns: number;
  /** The operator's exit stats. */
  stats: Record<string, number>;
  readyWriteP99: number;
  /** CPU ms per turn over the rollout: the operator, the API server + etcd, the simulator, this. */
  cpuPerTurn: { operator: number; api: number; agents: number; self: number };
  rssMiB: number;
  startupRssMiB: number;
  totalMs: number;
  idealMs: number;
  rounds: number;
  load: number;
}

/**
 * The issue's goals this run missed, each with its figure and the measured reason: what this
 * run's figures say the miss is made of (its stages, whose CPU, the load), never a guess.
 */
function goalsMissed(m: Measured): string[] {
  const s = m.stats;
  const n = (k: string): number => Number(s[k]);
  const perTurn = (k: string): string => (n(k) / m.turns).toFixed(2);
  const c = m.cpuPerTurn;
  const cpu =
    `CPU ms per turn: API server + etcd ${c.api.toFixed(1)}, simulator ${c.agents.toFixed(1)}, ` +
    `operator ${c.operator.toFixed(1)}, this process ${c.self.toFixed(1)}; load ${m.load.toFixed(1)}`;
  // A grant's stages (p99 each), the largest named: where the grant's time went. A grant is
  // seen once the status write that holds its turn lands; a pass's p99 is over every pass,
  // most of which write nothing, so the status write's own p99 stands beside it.
  const stages: [string, number][] = [
    ["the Ready write's answer from the API server", m.readyWriteP99],
    ["the operator's wait for its pass", n("passWaitP99Ms")],
    ["decide", n("decideP99Ms")],
    ["the status write's round trip", n("statusWriteP99Ms")],
  ];
  const [largest] = [...stages].sort((a, b) => b[1] - a[1])[0]!;
  const extraPerRound = (m.totalMs - m.idealMs) / m.rounds;
  return [
    n("decideP99Ms") < 50
      ? ""
      : `decide p99 ${n("decideP99Ms")} ms >= 50 (decide's CPU p99 ${n("decideCpuP99Ms")} ms; the rest waits for a core at load ${m.load.toFixed(1)})`,
    m.p99 < 1000
      ? ""
      : `grant p99 ${m.p99} ms >= 1000 (p99 each: ${stages.map(([k, v]) => `${k} ${v.toFixed(0)} ms`).join(", ")}` +
        `, a pass ${n("passP99Ms").toFixed(0)} ms over every pass; the largest: ${largest}; ${cpu})`,
    n("clusterWrites") + n("machineWrites") + n("events") <= 3 * m.turns
      ? ""
      : `writes per turn ${((n("clusterWrites") + n("machineWrites") + n("events")) / m.turns).toFixed(2)} > 3 (status ${perTurn("clusterWrites")}, Lost marks ${perTurn("machineWrites")}, Events ${perTurn("events")} per turn)`,
    m.rssMiB <= 256
      ? ""
      : `RSS ${m.rssMiB.toFixed(0)} MiB > 256 (V8 heap peak ${n("heapPeakMiB")} MiB; ${m.startupRssMiB.toFixed(0)} MiB by the end of start-up)`,
    m.totalMs <= 1.05 * m.idealMs
      ? ""
      : `overhead ${(m.totalMs / m.idealMs).toFixed(3)} > 1.05 (the rollout took ${(m.totalMs / 1000).toFixed(1)} s against ${(m.idealMs / 1000).toFixed(1)} s: ${extraPerRound.toFixed(0)} ms more a round over ${m.rounds} rounds, grant p50 ${m.p50} ms, p99 ${m.p99} ms)`,
  ].filter(Boolean);
}

async function waitUntil(cond: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`bench: timed out after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

await main();
