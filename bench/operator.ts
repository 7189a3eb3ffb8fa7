// bench:operator — cluster-operator rolling 1,000 Machines (`-- --machines 5000`: a cluster's
// supported maximum of nodes) on a real API server.
//
// A private control plane (etcd + kube-apiserver, built by `npm run cluster`) holds one
// Cluster with maxUnavailable 10% and 1,000 Machines with heartbeat Leases; this process
// plays every agent (stage, ask, act on the turn for PER_MACHINE_MS, come back Ready) and
// `liken operator` runs as its own process. Measured:
//   grant latency  from the moment a slot could be granted (a request with a free slot, the
//                  Ready write that freed one, or the first machine's Ready on V2 that lifts the
//                  failure brake's one-at-a-time) to the turn seen in the Cluster status;
//   requests/turn  the operator's own API requests (status writes, Lost marks, Events,
//                  re-reads after 409) per turn, from its exit stats;
//   CPU            of the operator process (/proc utime + stime) over the rollout, per turn
//                  (cpu-ms-per-turn) and per pass (logged): CPU seconds are far less sensitive
//                  to the machine's load than latencies;
//   decide p99     the operator's own decide() time, p99 over its last 4,096 decisions (its exit
//                  stats; liken_operator_decide_seconds is the same figure as a histogram);
//   RSS, heap      peak RSS of the operator process (VmHWM, /proc) and, beside it, the peak of
//                  the V8 heap in use (sampled each second by the operator, in its exit stats):
//                  the difference is Node's own code, compiled code, and heap V8 grew but holds
//                  empty; it runs from the CLI bundle as compiled JS;
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
//   - the simulated agents are this one process: their status writes (a GET and a PUT each,
//     at most WRITE_CONCURRENCY at once, over kept-alive connections) and 333 Lease writes a
//     second at 5,000 machines share the 2 cores with the operator, the API server and etcd.
//     A freed slot is timed when its Ready write goes out (after this process's own queue, which
//     500 separate machines would not have), so the queue is not in the grant latency; the
//     cores it takes are, in every figure but the operator's CPU;
//   - on a loaded machine the heartbeats fall behind and the operator reads machines Lost (as it
//     must): BENCH_OPERATOR_LOST_AFTER raises its threshold for such runs, and the log counts
//     the heartbeats skipped;
//   - the API server's and etcd's work per turn (the idle cost above is their steady state);
//   - a real drain, reboot and trial (PER_MACHINE_MS stands for them).
// Goals (issues 28, 43): grant p99 < 1 s, at most 3 API writes per turn, overhead <= 1.05,
// RSS <= 256 MiB, decide p99 < 50 ms.
// Last line: operator: machines=N grant-p99=<ms> writes-per-turn=<n> requests-per-turn=<n> rss=<MiB> heap=<MiB> cpu-ms-per-turn=<ms> decide-p99=<ms> overhead-vs-ideal=<ratio> idle-apiserver-vs-kubelet-lease=<ratio>
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
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
  type Machine,
  type MachineStatus,
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
/** The simulated agents' status writes in flight at once (each a GET and a PUT). */
const WRITE_CONCURRENCY = 32;
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

/** Runs at most `n` of the functions given to it at once, the others in order after. */
function limiter(n: number): <T>(fn: () => Promise<T>) => Promise<T> {
  let active = 0;
  const waiting: (() => void)[] = [];
  return async (fn) => {
    if (active >= n) await new Promise<void>((r) => waiting.push(r));
    else active++;
    try {
      return await fn();
    } finally {
      const next = waiting.shift();
      if (next !== undefined) next();
      else active--;
    }
  };
}
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
  // The simulated agents talk as the real ones do: the lean client (rest.ts), one kept-alive
  // connection pool (client-node opens a TLS connection per request: 333 handshakes a second
  // for 5,000 heartbeats, which loaded the API server and this process, not the operator).
  const rest = new Rest(loadRestConfig(kubeconfig), "liken-bench");
  const machineApi = new RestResource<Machine>(rest, "Machine", api.machines.path, "bench");
  const leaseApi = new RestResource<BenchLease>(
    rest,
    "Lease",
    `/apis/coordination.k8s.io/v1/namespaces/${HEARTBEAT_NAMESPACE}/leases`,
    "bench",
  );
  const leaseOf = new Map<string, BenchLease>();
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
    const lease = await leaseApi.create({
      apiVersion: "coordination.k8s.io/v1",
      kind: "Lease",
      metadata: { name: m, labels: { [LABEL_CLUSTER]: cluster, [LABEL_MACHINE]: m } },
      spec: { holderIdentity: m, leaseDurationSeconds: 40, renewTime: microTime(Date.now()) },
    });
    leaseOf.set(m, lease);
  });
  log(`bench: ${N} Machines and Leases created in ${((Date.now() - t0) / 1000).toFixed(1)} s`);

  // Heartbeats: every Lease renewed every 15 s, spread evenly. As a real agent does
  // (lease-renewal.ts): one PUT of the Lease it last wrote, over a kept-alive connection; a
  // 409 reads it again for the next beat. A machine whose last beat is still on its way
  // skips one (a queue of beats behind a slow API server would make the whole fleet Lost).
  let beating = true;
  const beatsInFlight = new Set<string>();
  let beatsSkipped = 0;
  const renew = async (m: string): Promise<void> => {
    if (beatsInFlight.has(m)) {
      beatsSkipped++;
      return;
    }
    beatsInFlight.add(m);
    try {
      const base = leaseOf.get(m) ?? (await leaseApi.get(m));
      const body = { ...base, spec: { ...base.spec, renewTime: microTime(Date.now()) } };
      leaseOf.set(m, await leaseApi.replace(body));
    } catch {
      leaseOf.delete(m); // a missed beat; the next one, in 15 s, reads the Lease again
    } finally {
      beatsInFlight.delete(m);
    }
  };
  let next = 0;
  let periodMs = HEARTBEAT_MS;
  const beatTimer = setInterval(() => {
    if (!beating) return;
    const per = Math.ceil(N / (periodMs / 100));
    for (let k = 0; k < per; k++) void renew(names[next++ % N]!);
  }, 100);

  // The fleet at rest, before the operator starts: the API server's and etcd's CPU with no
  // heartbeat at all (their own floor: controllers, compaction), at liken's heartbeat rate, and
  // at a kubelet's Lease rate (the same write), each over IDLE_MS; a machine's cost is what it
  // adds to the floor.
  const idleCost = async (ms: number | undefined): Promise<number> => {
    beating = ms !== undefined;
    periodMs = ms ?? HEARTBEAT_MS;
    await new Promise((r) => setTimeout(r, ms ?? 5000)); // settle at the new rate first
    const c0 = apiCpuMs(apiPids);
    await new Promise((r) => setTimeout(r, IDLE_MS));
    return (apiCpuMs(apiPids) - c0) / (IDLE_MS / 1000); // CPU ms per second
  };
  const floor = await idleCost(undefined);
  const likenIdle = (await idleCost(HEARTBEAT_MS)) - floor;
  const kubeletIdle = (await idleCost(KUBELET_LEASE_MS)) - floor;
  periodMs = HEARTBEAT_MS;
  const perMachineUs = (cpuMsPerS: number): string => ((cpuMsPerS * 1000) / N).toFixed(1);
  log(
    `bench: idle API server + etcd CPU over a floor of ${floor.toFixed(0)} ms/s: liken's heartbeats add ${likenIdle.toFixed(0)} ms/s (${perMachineUs(likenIdle)} us/s per machine), a kubelet's Lease rate ${kubeletIdle.toFixed(0)} ms/s (${perMachineUs(kubeletIdle)} us/s per machine)`,
  );

  // The operator runs compiled JavaScript, as in its container image: one bundle of the CLI
  // (from a source checkout bin/liken.js would compile TypeScript inside the measured process).
  // BENCH_OPERATOR_ENTRY: a bundle built before (another commit's operator, for a comparison
  // in the same conditions: two benches side by side).
  const entry = process.env.BENCH_OPERATOR_ENTRY ?? (await useCliBundle());
  const nodeOptions = process.env.BENCH_OPERATOR_NODE_OPTIONS?.split(" ").filter(Boolean) ?? [];
  const op = spawn(
    process.execPath,
    [
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

  // The fleet: each machine acts on its turn for PER_MACHINE_MS and comes back Ready.
  const freed: number[] = []; // times a slot became free, oldest first
  const grants: { ms: number; at: number; machine: string }[] = [];
  const acting = new Set<string>();
  const done = new Set<string>();
  let maxTurns = 0;
  let lastReady = 0;
  let readyWritten = 0;
  const writeLimit = limiter(WRITE_CONCURRENCY);
  const writeStatus = async (m: string, status: MachineStatus): Promise<void> => {
    for (let attempt = 1; ; attempt++) {
      try {
        await machineApi.updateStatus(m, (cur: Machine) => ({
          ...cur,
          status: { ...cur.status, ...status },
        }));
        return;
      } catch (e) {
        // The API server under a wave's load may drop a connection: try again, as an agent does.
        if (attempt >= 5) throw e;
        await new Promise((r) => setTimeout(r, 200 * attempt));
      }
    }
  };
  const watcher = new ResourceWatcher<Cluster>(api.clusters, {
    onChange: (ev) => {
      const turns = ev.object.status?.rebootTurns ?? [];
      maxTurns = Math.max(maxTurns, turns.length);
      const seen = Date.now();
      for (const t of turns) {
        if (acting.has(t.machine) || done.has(t.machine)) continue;
        acting.add(t.machine);
        const from = freed.shift();
        if (from !== undefined) {
          grants.push({ ms: seen - from, at: seen, machine: t.machine });
        }
        void (async () => {
          // The machine's time starts when it sees its turn; the Updating report is part of
          // that time, as a real agent's drain and reboot are.
          const back = new Promise((r) => setTimeout(r, PER_MACHINE_MS));
          await writeLimit(() =>
            writeStatus(t.machine, { step: "Updating", updateStage: "Rebooting" }),
          );
          await back;
          await writeLimit(async () => {
            // The slot is free from the moment the Ready write is sent (after this process's
            // own queue of writes, which 500 separate machines would not have): queue it
            // before the write, or the operator's next turn (seen on the watch) can arrive
            // before the write's answer and be matched with a later slot, which once a wave
            // inflated the p99 by a whole wave.
            const readyAt = Date.now();
            acting.delete(t.machine);
            done.add(t.machine);
            // A slot freed: it may go to a machine still waiting (none after the last wave).
            // The first machine back on V2 proves the release, which also frees the budget's
            // other slots that the failure brake held back until then.
            const slots = done.size === 1 ? BUDGET_N : 1;
            for (let k = 0; k < slots; k++) {
              if (done.size + acting.size + freed.length < N) freed.push(readyAt);
            }
            await writeStatus(t.machine, {
              version: V2,
              digest: D2,
              step: "Ready",
              updateStage: undefined,
              staged: undefined,
              turnRequest: undefined,
            } as MachineStatus);
          });
          lastReady = Date.now();
          readyWritten++;
        })();
      }
    },
  });
  await watcher.start();

  const cpu0 = procStats(op.pid!);
  // Every machine asked before the operator started; granting begins when its grace ends, with
  // one turn: nobody has proved V2 yet (spec.rollout.maxFailedTrials 1 by default).
  const start = grantsFrom;
  freed.push(start);
  await waitUntil(() => readyWritten === N, 30 * 60_000);
  const total = lastReady - start;
  const cpu1 = procStats(op.pid!);
  beating = false;
  clearInterval(beatTimer);
  watcher.stop();

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
    `bench: heartbeats skipped because the machine's last one was still on its way: ${beatsSkipped}`,
  );
  const worst = [...grants].sort((a, b) => b.ms - a.ms).slice(0, 15);
  log(
    `bench: slowest grants ${worst.map((w) => `${w.machine}:${w.ms}ms@${((w.at - start) / 1000).toFixed(1)}s`).join(" ")}`,
  );
  log(`bench: operator stats ${JSON.stringify(stats)}`);
  log(`bench: grant latency p50 ${p50} ms, p99 ${p99} ms over ${latencies.length} grants`);
  log(
    `bench: operator CPU ${((cpu1.cpuMs - cpu0.cpuMs) / 1000).toFixed(1)} s during the rollout (${((cpu1.cpuMs - cpu0.cpuMs) / Number(stats.reconciles)).toFixed(1)} ms per pass over ${stats.reconciles} passes), peak RSS ${cpu1.peakRssMiB.toFixed(0)} MiB, peak heap ${stats.heapPeakMiB} MiB`,
  );
  log(
    `bench: rollout ${(total / 1000).toFixed(1)} s vs ideal (1 + ceil(${N - 1}/${BUDGET_N})) x ${PER_MACHINE_MS / 1000} s = ${(ideal / 1000).toFixed(1)} s`,
  );
  log(
    `bench: writes per turn ${(writes / turns).toFixed(2)} (status ${stats.clusterWrites}, Lost marks ${stats.machineWrites}, Events ${stats.events})`,
  );
  const goals = goalsMissed(
    p99,
    writes / turns,
    cpu1.peakRssMiB,
    total / ideal,
    Number(stats.decideP99Ms),
  );
  log(`bench: goals ${goals.length === 0 ? "met" : `missed: ${goals.join(", ")}`}`);
  const cpuPerTurnMs = (cpu1.cpuMs - cpu0.cpuMs) / turns;
  process.stdout.write(
    `operator: machines=${N} grant-p99=${p99} writes-per-turn=${(writes / turns).toFixed(2)} requests-per-turn=${(requests / turns).toFixed(2)} rss=${cpu1.peakRssMiB.toFixed(0)} heap=${Number(stats.heapPeakMiB)} cpu-ms-per-turn=${cpuPerTurnMs.toFixed(1)} decide-p99=${Number(stats.decideP99Ms)} overhead-vs-ideal=${(total / ideal).toFixed(3)} idle-apiserver-vs-kubelet-lease=${(likenIdle / kubeletIdle).toFixed(2)}\n`,
  );
}

/** The issue's goals this run missed, each with its figure. */
function goalsMissed(
  p99: number,
  writesPerTurn: number,
  rssMiB: number,
  overhead: number,
  decideP99Ms: number,
): string[] {
  return [
    decideP99Ms < 50 ? "" : `decide p99 ${decideP99Ms} ms >= 50`,
    p99 < 1000 ? "" : `grant p99 ${p99} ms >= 1000`,
    writesPerTurn <= 3 ? "" : `writes per turn ${writesPerTurn.toFixed(2)} > 3`,
    rssMiB <= 256 ? "" : `RSS ${rssMiB.toFixed(0)} MiB > 256`,
    overhead <= 1.05 ? "" : `overhead ${overhead.toFixed(3)} > 1.05`,
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
