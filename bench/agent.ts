// bench:agent — what an idle agent costs, how fast it reacts, what its download child weighs.
//
// The lab's parts, for real: a private control plane (etcd, kube-apiserver, controller-manager,
// kwok), liken's API installed as the README says, a release channel, both copies of
// cluster-operator, and N simulated machines (default 20), each the real `liken agent run` from
// the lab's CLI bundle, with file-backed slots and the firmware model, at the production loop
// timings (loopSeconds 5, heartbeatSeconds 10). Measured:
//   idle requests  API requests per second per agent over an idle window of IDLE_MS, from the
//                  API server's apiserver_request_total on /metrics. That counter also counts
//                  kwok's node heartbeats, the operators' leader election and the API server's
//                  own leases, and it has no user label; so the agents are then stopped
//                  (SIGSTOP) for BACKGROUND_MS, well inside the 40 s after which a silent
//                  machine reads Lost, and the rate of that window is subtracted:
//                  (idle rate - background rate) / N. A watch is counted when it ends, so an
//                  open watch shows here only when the server closes it (every 30-60 min).
//   rss            median VmRSS of the agent processes at the end of the idle window;
//   heap           beside it, the median V8 heap in use of the same agents (their served
//                  nodejs_heap_size_used_bytes): RSS minus heap is Node's code, V8's empty
//                  but touched pages, the modules' compiled code and malloc; the log splits the RSS into anonymous memory and file pages (Node's binary).
//                  BENCH_HEAP_SNAPSHOT=1 with NODE_OPTIONS="--heapsnapshot-signal=SIGUSR2
//                  --diagnostic-dir=DIR" has one agent write its idle heap snapshot to DIR;
//   idle cpu       time on the CPU of every thread of the agent processes over the idle window
//                  (/proc/<pid>/task/*/schedstat, in ns), ms per minute per agent. The window
//                  opens once every agent has run AGENT_SETTLE_MS: a young agent still pays its
//                  start (V8 compiling its code, the memory reducer's full collections 50-75 s
//                  after the start), and a window opened 20 s after the start measured that
//                  tail instead of the idle agent. The log has the rate of each 5 s of the
//                  window, so a tail would show, and the wake-ups (times a thread ran). The
//                  baseline in the same window: a bare Node process with a timer firing
//                  BASELINE_WAKEUPS_PER_MIN times a minute, logged with the agents' cost per
//                  wake-up and the ratio (what a wake-up costs this machine, quiet or busy);
//   react          spec.version set on the Cluster; from that write until each Machine's
//                  status shows Downloading (or any later step), p99 over the N machines.
//                  Where the time went, logged beside it: when each agent decided (its
//                  "phase" log line), and how long the API server took for the status PUTs
//                  (apiserver_request_duration_seconds of PUT machines/status), so what is left
//                  is the watch delivering the change to the agent and the status to the bench;
//   download rss   one more machine, in a Cluster of its own, whose target is a 256 MiB
//                  release: the peak RSS (VmHWM) of its agent's download child.
// Last line:
//   agent: machines=<N> idle-requests-per-second=<x> rss=<MiB> heap=<MiB> idle-cpu-ms-per-minute=<n> react-p99=<ms> download-rss=<MiB> load=<1-min load average> goals=met|missed(...)
// Goals: idle requests <= 0.12 per second per agent, RSS <= 64 MiB (issue 43), idle CPU <= 120
// ms a minute, react p99 <= 1000 ms, download RSS <= 100 MiB. Each goal missed says its figure
// and what this run measured it is made of: the request rates with and without the agents; the
// RSS's anonymous pages (V8's heap in use among them) and file pages; the wake-ups and their
// cost beside a bare Node process's; when the agents decided and the API server's PUT time.
// It runs the lab of this checkout (.lab/, control plane "lab"): a lab left running here is
// stopped first, as `npm run lab` does.
import { execFile, spawn } from "node:child_process";
import { randomFillSync } from "node:crypto";
import {
  closeSync,
  existsSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  writeFileSync,
  writeSync,
} from "node:fs";
import { loadavg } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { ResourceWatcher } from "../src/api/watch.js";
import { API_VERSION, type Machine } from "../src/api/types.js";
import { agentKubeconfig, createMachine, createNode } from "../src/lab/fleet.js";
import { LAB_CLUSTER, LAB_DIR, startLab, stopLab, type Lab } from "../src/lab/lab.js";
import { SimulatedMachine } from "../src/lab/machine.js";
import { startFleet } from "../src/lab/processes.js";
import { labKernel } from "../src/lab/releases.js";
import { buildRelease } from "../src/release/build.js";

const N = Number(process.env.BENCH_MACHINES ?? 20);
const IDLE_MS = Number(process.env.BENCH_IDLE_MS ?? 60_000);
/** Agents stopped this long stay well inside the operator's 40 s Lost threshold. */
const BACKGROUND_MS = 20_000;
/** After the fleet reported and the operators started: their first writes. */
const SETTLE_MS = 15_000;
/**
 * The youngest agent's age when the idle window opens. Measured (bench/agent-profile.ts,
 * --trace-gc): V8's memory reducer runs its full collections 50-75 s after an agent starts, and
 * the rate of each 5 s falls to the idle rate by then.
 */
const AGENT_SETTLE_MS = 90_000;
/** The baseline process's timer rate: about what an idle lab agent wakes up (126/min measured). */
const BASELINE_WAKEUPS_PER_MIN = 120;
const BIG_BYTES = 256 * 1024 * 1024;
const BIG_VERSION = "2026.10.20-001";
const BIG_CLUSTER = "bench-big";
const BIG_MACHINE = "big-1";
/** The production loop timings (src/agent/config.ts defaults), not the lab's quick ones. */
const AGENT_TIMINGS = { loopSeconds: 5, heartbeatSeconds: 10 };
const MiB = 1024 * 1024;
const run = promisify(execFile);
const log = (l: string): void => void process.stderr.write(`bench: ${l}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function percentile(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)] ?? NaN;
}

/**
 * Milliseconds on the CPU of every thread of `pid` (the thread pool and V8's helpers too), and
 * how many times its threads ran, from schedstat: exact, where utime+stime count 10 ms ticks.
 */
function cpuOf(pid: number): { ms: number; runs: number } {
  let ns = 0;
  let runs = 0;
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const f = readFileSync(`/proc/${pid}/task/${tid}/schedstat`, "utf8").split(" ");
      ns += Number(f[0]);
      runs += Number(f[2]);
    } catch {
      // the thread ended
    }
  }
  return { ms: ns / 1e6, runs };
}

/** Milliseconds since `pid` started (its start in clock ticks since boot, /proc/uptime now). */
function ageMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
  const uptime = Number(readFileSync("/proc/uptime", "utf8").split(" ")[0]);
  return (uptime - Number(stat[19]) / 100) * 1000;
}

function statusKiB(
  pid: number,
  field: "VmRSS" | "VmHWM" | "RssAnon" | "RssFile",
): number | undefined {
  try {
    const m = new RegExp(`${field}:\\s+(\\d+) kB`).exec(
      readFileSync(`/proc/${pid}/status`, "utf8"),
    );
    return m ? Number(m[1]) : undefined;
  } catch {
    return undefined; // gone
  }
}

function childrenOf(pid: number): number[] {
  try {
    const text = readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").trim();
    return text === "" ? [] : text.split(/\s+/).map(Number);
  } catch {
    return [];
  }
}

async function apiMetrics(lab: Lab): Promise<string> {
  const { stdout } = await run(path.join(lab.binDir, "kubectl"), ["get", "--raw", "/metrics"], {
    env: { ...process.env, KUBECONFIG: lab.controlPlane.kubeconfig },
    maxBuffer: 256 * MiB,
  });
  return stdout;
}

/** Seconds spent in, and the count of, the API server's PUTs of Machine statuses so far. */
function statusPuts(metrics: string): { seconds: number; count: number } {
  const out = { seconds: 0, count: 0 };
  for (const line of metrics.split("\n")) {
    const m = /^apiserver_request_duration_seconds_(sum|count)\{(.*)\} (\S+)$/.exec(line);
    if (!m || !/resource="machines"/.test(m[2]!) || !/subresource="status"/.test(m[2]!)) continue;
    if (!/verb="PUT"/.test(m[2]!)) continue;
    if (m[1] === "sum") out.seconds += Number(m[3]);
    else out.count += Number(m[3]);
  }
  return out;
}

/** When each agent first logged a decision that moves it (its "phase" line), from `since`. */
function decidedAt(m: SimulatedMachine, since: number, moving: Set<string>): number | undefined {
  for (const line of readFileSync(m.logFile, "utf8").split("\n")) {
    if (!line.includes('"msg":"phase"')) continue;
    const l = JSON.parse(line) as { time: number; step?: string };
    if (l.time >= since && moving.has(l.step ?? "")) return l.time;
  }
  return undefined;
}

/**
 * The same small piece of work timed back to back and after 1 s asleep (the idle agent's
 * rhythm), medians in µs: a CPU that runs a short burst after idling slower than a busy one
 * (a clock lowered for power, caches taken by others) makes the same agent cost more CPU time.
 */
async function burstMicros(): Promise<{ hot: number; afterSleep: number }> {
  const work = (): number => {
    const t = process.hrtime.bigint();
    let x = 0;
    for (let i = 0; i < 200_000; i++) x = (x * 31 + i) | 0;
    return Number(process.hrtime.bigint() - t) / 1000 + (x === 0.5 ? 1 : 0);
  };
  const median = (a: number[]) => a.sort((x, y) => x - y)[a.length >> 1]!;
  for (let i = 0; i < 3_000; i++) work(); // until V8 optimized it (200 runs were not enough)
  const hot = Array.from({ length: 100 }, work);
  const afterSleep: number[] = [];
  for (let i = 0; i < 20; i++) {
    await sleep(1_000);
    afterSleep.push(work());
  }
  return { hot: median(hot), afterSleep: median(afterSleep) };
}

/** Sum of apiserver_request_total over every label set, and per verb/resource for the log. */
async function requestTotals(lab: Lab): Promise<{ total: number; by: Map<string, number> }> {
  const stdout = await apiMetrics(lab);
  let total = 0;
  const by = new Map<string, number>();
  for (const line of stdout.split("\n")) {
    if (!line.startsWith("apiserver_request_total{")) continue;
    const value = Number(line.slice(line.lastIndexOf(" ") + 1));
    total += value;
    const label = (k: string) => new RegExp(`${k}="([^"]*)"`).exec(line)?.[1] ?? "";
    const sub = label("subresource");
    const key = `${label("verb")} ${label("resource")}${sub ? `/${sub}` : ""}`;
    by.set(key, (by.get(key) ?? 0) + value);
  }
  return { total, by };
}

function delta(a: Map<string, number>, b: Map<string, number>): string {
  return [...b]
    .map(([k, v]) => [k, v - (a.get(k) ?? 0)] as const)
    .filter(([, v]) => v > 0)
    .sort((x, y) => y[1] - x[1])
    .map(([k, v]) => `${k}=${v}`)
    .join(" ");
}

async function waitFor(what: string, cond: () => boolean | Promise<boolean>, ms: number) {
  const deadline = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`bench: ${what}: not within ${ms / 1000} s`);
    await sleep(100);
  }
}

async function main(): Promise<void> {
  const lab = await startLab({ machines: N, log });
  try {
    await bench(lab);
  } finally {
    await stopLab(lab);
  }
}

async function bench(lab: Lab): Promise<void> {
  const [v1, v2] = lab.releases;
  // The next release in the catalog from the start: the react step only sets spec.version.
  const cluster = await lab.api.clusters.get(LAB_CLUSTER);
  await lab.api.clusters.patch(LAB_CLUSTER, {
    spec: {
      releases: {
        ...cluster.spec.releases,
        catalog: [
          ...(cluster.spec.releases.catalog ?? []),
          { version: v2!.version, digest: v2!.digest },
        ],
      },
    },
  });
  // The baseline, measured in the same window: a bare Node process whose only work is a timer
  // firing BASELINE_WAKEUPS_PER_MIN times a minute, about an idle agent's wake-ups. What one
  // wake-up costs on this machine, quiet or busy, bounds what an idle agent can cost.
  const baseline = spawn(
    process.execPath,
    ["-e", `setInterval(() => {}, ${Math.round(60_000 / BASELINE_WAKEUPS_PER_MIN)})`],
    { stdio: "ignore" },
  );
  // However the bench ends, the baseline does not outlive it.
  process.once("exit", () => baseline.kill());
  const fleet = await startFleet(lab, log, AGENT_TIMINGS);
  const machines = [...fleet.machines.values()];
  const pids = () => machines.map((m) => m.agentPid).filter((p): p is number => p !== undefined);
  await sleep(SETTLE_MS);
  await waitFor(
    `every agent has run ${AGENT_SETTLE_MS / 1000} s`,
    () => pids().length === N && Math.min(...pids().map(ageMs)) >= AGENT_SETTLE_MS,
    AGENT_SETTLE_MS + 60_000,
  );

  // ---- idle
  const p0 = pids();
  if (p0.length !== N) throw new Error(`bench: ${p0.length} of ${N} agents run`);
  log(
    `idle window opens; the youngest agent has run ${(Math.min(...p0.map(ageMs)) / 1000).toFixed(0)} s`,
  );
  const r0 = await requestTotals(lab);
  const c0 = p0.map(cpuOf);
  const base0 = cpuOf(baseline.pid!);
  const t0 = Date.now();
  const burst = burstMicros();
  const series: string[] = [];
  for (let prev = c0, t = t0; Date.now() - t0 < IDLE_MS;) {
    await sleep(Math.min(5_000, IDLE_MS - (Date.now() - t0)));
    const now = p0.map(cpuOf);
    const ms = now.reduce((n, c, i) => n + c.ms - prev[i]!.ms, 0) / N;
    series.push(((ms / (Date.now() - t)) * 60_000).toFixed(0));
    [prev, t] = [now, Date.now()];
  }
  const r1 = await requestTotals(lab);
  const t1 = Date.now();
  const c1 = p0.map(cpuOf);
  const base1 = cpuOf(baseline.pid!);
  baseline.kill();
  const rss =
    percentile(
      p0.map((p) => statusKiB(p, "VmRSS") ?? NaN),
      50,
    ) / 1024;
  // The V8 heap beside the RSS: each agent's own nodejs_heap_size_used_bytes, from the metrics
  // it serves (a lab agent serves them on a loopback port its log names).
  const heap = percentile(await Promise.all(machines.map((m) => heapMiB(m.logFile))), 50);
  // What the RSS is made of: anonymous memory (V8's heap pages, malloc) and file pages (Node's
  // own binary, its code that has run: shared by every agent on the machine, counted in each).
  const part = (f: "RssAnon" | "RssFile") =>
    percentile(
      p0.map((p) => statusKiB(p, f) ?? NaN),
      50,
    ) / 1024;
  log(
    `rss median ${rss.toFixed(1)} MiB: anonymous ${part("RssAnon").toFixed(1)}, file ${part("RssFile").toFixed(1)} (Node's binary); heap in use ${heap.toFixed(1)}`,
  );
  if (process.env.BENCH_HEAP_SNAPSHOT === "1") {
    // The agents run with NODE_OPTIONS from this process: with --heapsnapshot-signal=SIGUSR2
    // (and --diagnostic-dir) one agent writes its idle heap there.
    process.kill(p0[0]!, "SIGUSR2");
    log(
      `asked agent ${p0[0]} for a heap snapshot (NODE_OPTIONS=${process.env.NODE_OPTIONS ?? ""})`,
    );
  }
  const perMin = (k: "ms" | "runs") =>
    (c1.reduce((n, c, i) => n + c[k] - c0[i]![k], 0) / N / (t1 - t0)) * 60_000;
  const cpuPerMin = perMin("ms");
  log(`idle window ${((t1 - t0) / 1000).toFixed(0)} s: ${delta(r0.by, r1.by)}`);
  const b = await burst;
  log(
    `idle cpu ms/min per agent, each 5 s: ${series.join(" ")}; wake-ups ${perMin("runs").toFixed(0)}/min per agent; ` +
      `load average ${loadavg()[0]!.toFixed(1)}; a fixed piece of work took ${b.hot.toFixed(0)} µs hot, ` +
      `${b.afterSleep.toFixed(0)} µs after 1 s asleep`,
  );
  const perBaseMin = (k: "ms" | "runs") => ((base1[k] - base0[k]) / (t1 - t0)) * 60_000;
  log(
    `baseline: a bare node process with a timer ${BASELINE_WAKEUPS_PER_MIN} times a minute used ` +
      `${perBaseMin("ms").toFixed(0)} ms/min over ${perBaseMin("runs").toFixed(0)} wake-ups ` +
      `(${((perBaseMin("ms") / perBaseMin("runs")) * 1000).toFixed(0)} µs each); the agents ` +
      `${((cpuPerMin / perMin("runs")) * 1000).toFixed(0)} µs per wake-up; agent vs baseline ` +
      `${(cpuPerMin / perBaseMin("ms")).toFixed(2)}`,
  );

  // ---- background: the same control plane with every agent stopped
  for (const p of p0) process.kill(p, "SIGSTOP");
  let b0, b1, tb0, tb1;
  try {
    b0 = await requestTotals(lab);
    tb0 = Date.now();
    await sleep(BACKGROUND_MS);
    b1 = await requestTotals(lab);
    tb1 = Date.now();
  } finally {
    for (const p of p0) process.kill(p, "SIGCONT");
  }
  log(`background window ${((tb1 - tb0) / 1000).toFixed(0)} s: ${delta(b0.by, b1.by)}`);
  const idleRate = ((r1.total - r0.total) * 1000) / (t1 - t0);
  const bgRate = ((b1.total - b0.total) * 1000) / (tb1 - tb0);
  const perAgent = (idleRate - bgRate) / N;
  log(
    `requests/s: ${idleRate.toFixed(2)} with the agents, ${bgRate.toFixed(2)} without; ` +
      `per agent ${perAgent.toFixed(3)}; rss median ${rss.toFixed(1)} MiB; cpu ${cpuPerMin.toFixed(0)} ms/min per agent`,
  );
  await sleep(5_000); // every stopped agent has renewed its heartbeat again

  // ---- react
  const seen = new Map<string, number>();
  let written = 0;
  const moving = new Set(["Downloading", "RebootPending", "UpdatePending", "Updating"]);
  const watcher = new ResourceWatcher<Machine>(lab.api.machines, {
    onChange: (ev) => {
      const m = ev.object;
      if (written === 0 || seen.has(m.metadata.name)) return;
      if (moving.has(m.status?.step ?? "")) seen.set(m.metadata.name, Date.now() - written);
    },
  });
  await watcher.start();
  const puts0 = statusPuts(await apiMetrics(lab));
  written = Date.now();
  await lab.api.clusters.patch(LAB_CLUSTER, { spec: { version: v2!.version } });
  await waitFor("every Machine shows Downloading", () => seen.size === N, 120_000);
  watcher.stop();
  const puts1 = statusPuts(await apiMetrics(lab));
  const reacts = [...seen.values()];
  const reactP99 = percentile(reacts, 99);
  log(`react: p50 ${percentile(reacts, 50)} ms, p99 ${reactP99} ms, max ${Math.max(...reacts)} ms`);
  const decided = machines
    .map((m) => decidedAt(m, written, moving))
    .filter((t): t is number => t !== undefined)
    .map((t) => t - written);
  const putCount = puts1.count - puts0.count;
  const putMs = putCount > 0 ? ((puts1.seconds - puts0.seconds) * 1000) / putCount : NaN;
  log(
    `react stages: ${decided.length} agents decided (their logs) p50 ${percentile(decided, 50)} ms, ` +
      `p99 ${percentile(decided, 99)} ms after the write; the API server took ${putMs.toFixed(0)} ms ` +
      `per status PUT (${putCount} PUTs of Machine statuses, mean); the rest is the PUT's way ` +
      `to the server and the watch's back to the bench`,
  );
  await lab.api.clusters.patch(LAB_CLUSTER, { spec: { version: v1!.version } });

  // ---- download: one machine, a cluster of its own, a 256 MiB release
  const downloadRss = await benchDownload(lab, v1!);
  log(`download child peak RSS ${downloadRss.toFixed(1)} MiB`);

  const goals = agentGoalsMissed({
    perAgent,
    idleRate,
    bgRate,
    rss,
    heap,
    anon: part("RssAnon"),
    file: part("RssFile"),
    cpuPerMin,
    wakeUpsPerMin: perMin("runs"),
    baselineUsPerWakeUp: (perBaseMin("ms") / perBaseMin("runs")) * 1000,
    reactP99,
    decidedP99: percentile(decided, 99),
    putMs,
    downloadRss,
    load: loadavg()[0]!,
  });
  process.stdout.write(
    `agent: machines=${N} idle-requests-per-second=${perAgent.toFixed(3)} rss=${rss.toFixed(0)} heap=${heap.toFixed(1)} ` +
      `idle-cpu-ms-per-minute=${cpuPerMin.toFixed(0)} react-p99=${reactP99} download-rss=${downloadRss.toFixed(0)} ` +
      `load=${loadavg()[0]!.toFixed(1)} goals=${goals.length === 0 ? "met" : `missed(${goals.join("; ")})`}\n`,
  );
}

/** What one run measured, for the goals and the reasons of a miss. */
interface AgentMeasured {
  perAgent: number;
  /** API requests per second with the agents and with them stopped. */
  idleRate: number;
  bgRate: number;
  /** Medians, MiB: RSS, V8 heap in use, anonymous and file pages of the RSS. */
  rss: number;
  heap: number;
  anon: number;
  file: number;
  cpuPerMin: number;
  wakeUpsPerMin: number;
  /** What a wake-up cost a bare Node process in the same window (µs). */
  baselineUsPerWakeUp: number;
  reactP99: number;
  /** When the agents decided (their logs), p99 ms after the write; a status PUT's mean ms. */
  decidedP99: number;
  putMs: number;
  downloadRss: number;
  load: number;
}

/**
 * The goals (docs/testing.md, "Benchmarks"; issue 43: RSS at most 64 MiB) this run missed,
 * each with its figure and what this run measured it is made of.
 */
function agentGoalsMissed(m: AgentMeasured): string[] {
  const agentUs = (m.cpuPerMin / m.wakeUpsPerMin) * 1000;
  return [
    m.perAgent <= 0.12
      ? ""
      : `idle requests ${m.perAgent.toFixed(3)}/s per agent > 0.12 (${m.idleRate.toFixed(2)}/s with the agents, ${m.bgRate.toFixed(2)}/s without)`,
    m.rss <= 64
      ? ""
      : `RSS ${m.rss.toFixed(1)} MiB > 64 (anonymous ${m.anon.toFixed(1)} MiB of which V8's heap in use ${m.heap.toFixed(1)}; file pages ${m.file.toFixed(1)} MiB, Node's binary)`,
    m.cpuPerMin <= 120
      ? ""
      : `idle CPU ${m.cpuPerMin.toFixed(0)} ms/min > 120 (${m.wakeUpsPerMin.toFixed(0)} wake-ups a minute at ${agentUs.toFixed(0)} µs each; a bare Node process's wake-up took ${m.baselineUsPerWakeUp.toFixed(0)} µs at load ${m.load.toFixed(1)})`,
    m.reactP99 <= 1000
      ? ""
      : `react p99 ${m.reactP99} ms > 1000 (the agents decided p99 ${m.decidedP99} ms after the write; a status PUT took the API server ${m.putMs.toFixed(0)} ms; the rest is the watch's and the PUT's way; load ${m.load.toFixed(1)})`,
    m.downloadRss <= 100
      ? ""
      : `download RSS ${m.downloadRss.toFixed(0)} MiB > 100 (the download child's VmHWM; not split in this run)`,
  ].filter(Boolean);
}

/**
 * The agent's heap in use (MiB, nodejs_heap_size_used_bytes) from the metrics URL its log names
 * ("metrics served"); NaN when it names none or does not answer.
 */
async function heapMiB(logFile: string): Promise<number> {
  const line = readFileSync(logFile, "utf8")
    .split("\n")
    .findLast((l) => l.includes('"metrics served"'));
  const url = line === undefined ? undefined : (JSON.parse(line) as { url?: string }).url;
  if (url === undefined) return NaN;
  try {
    const text = await (await fetch(url)).text();
    const m = /^nodejs_heap_size_used_bytes (\S+)$/m.exec(text);
    return m === null ? NaN : Number(m[1]) / 2 ** 20;
  } catch {
    return NaN;
  }
}

/** A lab kernel and BIG_BYTES of random rootfs (the lab's hash-chain filler is too slow here). */
async function buildBigRelease(channelDir: string): Promise<{ digest: string }> {
  const src = path.join(LAB_DIR, "lab", "artifacts", BIG_VERSION);
  mkdirSync(src, { recursive: true });
  const kernel = path.join(src, "vmlinuz");
  const rootfs = path.join(src, "rootfs.img");
  writeFileSync(kernel, labKernel(BIG_VERSION, "ok"));
  const fd = openSync(rootfs, "w");
  const block = Buffer.alloc(16 * MiB);
  for (let off = 0; off < BIG_BYTES; off += block.length) writeSync(fd, randomFillSync(block));
  closeSync(fd);
  return buildRelease({
    version: BIG_VERSION,
    out: channelDir,
    artifacts: [
      { name: "kernel", file: kernel },
      { name: "rootfs", file: rootfs },
    ],
  });
}

async function benchDownload(lab: Lab, current: { version: string; digest: string }) {
  const t = Date.now();
  const big = await buildBigRelease(lab.channelDir);
  log(`built ${BIG_VERSION} (${BIG_BYTES / MiB} MiB) in ${((Date.now() - t) / 1000).toFixed(0)} s`);
  await lab.api.clusters.create({
    apiVersion: API_VERSION,
    kind: "Cluster",
    metadata: { name: BIG_CLUSTER },
    spec: {
      version: BIG_VERSION,
      releases: {
        source: lab.channel.url,
        catalog: [current, { version: BIG_VERSION, digest: big.digest }],
      },
      disruption: { maxUnavailable: 1 },
    },
  });
  await createNode(lab.kubeConfig, BIG_MACHINE);
  await createMachine(lab.api, BIG_CLUSTER, {
    name: BIG_MACHINE,
    role: "Worker",
    rebootPolicy: "Manual",
  });
  const dir = path.join(LAB_DIR, "lab", "machines", BIG_MACHINE);
  if (!existsSync(dir)) mkdirSync(dir, { recursive: true });
  const m = new SimulatedMachine({
    ...AGENT_TIMINGS,
    name: BIG_MACHINE,
    dir,
    cluster: BIG_CLUSTER,
    kubeconfig: agentKubeconfig(lab.controlPlane, dir, BIG_MACHINE),
    slotSize: BIG_BYTES + 64 * MiB,
  });
  await m.create();
  await m.install(lab.channel.url, current.version, current.digest);
  m.powerOn();
  lab.stoppers.push(() => m.stop());
  let peakKiB = 0;
  const watched = new Set<number>();
  await waitFor(
    `${BIG_MACHINE} staged ${BIG_VERSION}`,
    async () => {
      const agent = m.agentPid;
      if (agent !== undefined) for (const c of childrenOf(agent)) watched.add(c);
      for (const c of watched) peakKiB = Math.max(peakKiB, statusKiB(c, "VmHWM") ?? 0);
      const s = (await lab.api.machines.get(BIG_MACHINE)).status;
      return s?.staged?.version === BIG_VERSION;
    },
    600_000,
  );
  if (watched.size === 0) throw new Error("bench: no download child was seen");
  return peakKiB / 1024;
}

await main();
