// Where an idle agent's CPU goes, measured (a companion of bench:agent; `npx tsx
// bench/agent-profile.ts`; docs/agent.md, "Where an idle agent's CPU goes", has its findings).
//
// The same lab as bench:agent (its control plane, both operators, N real agents at the
// production timings). Over an idle window of IDLE_MS it records, per agent: CPU and wake-ups
// of its main thread and of its other threads (/proc/<pid>/task/*/schedstat), the rate of each
// 5 s, the watch events its Machine, its Cluster, its Node and its Lease received (the bench
// watches the same objects), its connections to the API server (a new local port is a new TLS
// handshake), and its log lines; and the API server's requests by verb, resource and code.
// In the window each agent also runs, as LIKEN_PROFILE says:
//   cpu  V8's sampling profiler (every LIKEN_PROFILE_INTERVAL_US, default 1000); the samples
//        are summed by function (self time, and time under each of liken's functions). The
//        profiler wakes the agent's main thread at its interval: its CPU figures are then not
//        the idle agent's, its shares are;
//   gc   --trace-gc, the collections counted and their pauses summed.
// Node 20 refuses --cpu-prof in NODE_OPTIONS, so a preload (PRELOAD below, --require) starts
// and stops either on SIGUSR2.
//   BENCH_MACHINES (default 5), BENCH_IDLE_MS (default 60000), BENCH_SETTLE_MS (default 15000:
//   after the operators started; the agents' age at the window's start is logged)
import { execFile } from "node:child_process";
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { promisify } from "node:util";
import { loadRestConfig, Rest } from "../src/api/rest.js";
import { RestResource } from "../src/api/rest-resource.js";
import { ResourceWatcher } from "../src/api/watch.js";
import { LAB_DIR, LAB_KUBECONFIG, startLab, stopLab, type Lab } from "../src/lab/lab.js";
import type { SimulatedMachine } from "../src/lab/machine.js";
import { startFleet } from "../src/lab/processes.js";

const N = Number(process.env.BENCH_MACHINES ?? 5);
const IDLE_MS = Number(process.env.BENCH_IDLE_MS ?? 60_000);
const SETTLE_MS = Number(process.env.BENCH_SETTLE_MS ?? 15_000);
/** cpu: V8's sampling profiler; gc: --trace-gc in the window (no profiler perturbing the CPU). */
const MODE = process.env.LIKEN_PROFILE ?? "cpu";
const AGENT_TIMINGS = { loopSeconds: 5, heartbeatSeconds: 10 };
const run = promisify(execFile);
const log = (l: string): void => void process.stderr.write(`profile: ${l}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** CLOCK_MONOTONIC in µs, the clock of V8's profile timestamps. */
const monoUs = (): number => Number(process.hrtime.bigint() / 1000n);

/** Loaded into each agent with --require: SIGUSR2 opens the window, the next one closes it. */
const PRELOAD = `"use strict";
const { Session } = require("node:inspector");
const { writeFileSync } = require("node:fs");
const path = require("node:path");
const v8 = require("node:v8");
const dir = process.env.LIKEN_PROFILE_DIR;
const mode = process.env.LIKEN_PROFILE;
const interval = Number(process.env.LIKEN_PROFILE_INTERVAL_US || 1000);
let session;
let running = false;
const done = (name, text) => writeFileSync(path.join(dir, process.pid + name), text);
process.on("SIGUSR2", () => {
  running = !running;
  if (mode === "gc") {
    process.stdout.write(running ? '{"msg":"gc window begins"}\\n' : '{"msg":"gc window ends"}\\n');
    v8.setFlagsFromString(running ? "--trace-gc" : "--no-trace-gc");
    if (!running) done(".done", "");
    return;
  }
  if (running) {
    session = new Session();
    session.connect();
    session.post("Profiler.enable", () =>
      session.post("Profiler.setSamplingInterval", { interval }, () => session.post("Profiler.start")),
    );
    return;
  }
  session.post("Profiler.stop", (err, res) => {
    if (!err) done(".cpuprofile", JSON.stringify(res.profile));
    session.disconnect();
  });
});
`;

/** ns on the CPU of `pid`'s main thread and of its other threads (schedstat: exact, not ticks). */
function threadNs(pid: number): Map<string, number> {
  const out = new Map<string, number>();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const name = Number(tid) === pid ? "main" : "others";
      const sched = readFileSync(`/proc/${pid}/task/${tid}/schedstat`, "utf8").split(" ");
      out.set(name, (out.get(name) ?? 0) + Number(sched[0]));
      // The third field: how many times the thread ran (each wake-up is one).
      out.set(`${name} runs`, (out.get(`${name} runs`) ?? 0) + Number(sched[2]) * 1e6);
    } catch {
      // the thread ended
    }
  }
  return out;
}

/** Seconds since `pid` started. */
function ageS(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
  const uptime = Number(readFileSync("/proc/uptime", "utf8").split(" ")[0]);
  return uptime - Number(stat[19]) / 100;
}

function cpuMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
  return ((Number(stat[11]) + Number(stat[12])) * 1000) / 100;
}

/** Local ports of each pid's TCP connections to `port`. */
async function sockets(port: string): Promise<Map<number, Set<string>>> {
  const { stdout } = await run("ss", ["-tnpH", "state", "established"]);
  const out = new Map<number, Set<string>>();
  for (const line of stdout.split("\n")) {
    const f = line.trim().split(/\s+/);
    if (f.length < 5 || !f[3]!.endsWith(`:${port}`)) continue;
    for (const m of line.matchAll(/pid=(\d+)/g)) {
      const pid = Number(m[1]);
      if (!out.has(pid)) out.set(pid, new Set());
      out.get(pid)!.add(f[2]!);
    }
  }
  return out;
}

async function requestTotals(lab: Lab): Promise<Map<string, number>> {
  const { stdout } = await run(path.join(lab.binDir, "kubectl"), ["get", "--raw", "/metrics"], {
    env: { ...process.env, KUBECONFIG: lab.controlPlane.kubeconfig },
    maxBuffer: 256 * 1024 * 1024,
  });
  const by = new Map<string, number>();
  for (const line of stdout.split("\n")) {
    if (!line.startsWith("apiserver_request_total{")) continue;
    const value = Number(line.slice(line.lastIndexOf(" ") + 1));
    const label = (k: string) => new RegExp(`${k}="([^"]*)"`).exec(line)?.[1] ?? "";
    const sub = label("subresource");
    const key = `${label("verb")} ${label("resource")}${sub ? `/${sub}` : ""} ${label("code")}`;
    by.set(key, (by.get(key) ?? 0) + value);
  }
  return by;
}

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

/** Self time (µs) by function within [fromUs, toUs], and by the parent chain of each. */
function selfTime(p: Profile, fromUs: number, toUs: number, into: Map<string, number>): number {
  const byId = new Map(p.nodes.map((n) => [n.id, n] as const));
  let t = p.startTime;
  let total = 0;
  for (let i = 0; i < p.samples.length; i++) {
    t += p.timeDeltas[i]!;
    const dt = p.timeDeltas[i + 1] ?? 0; // a sample stands for the time until the next one
    if (t < fromUs || t > toUs) continue;
    const n = byId.get(p.samples[i]!)!;
    const f = n.callFrame;
    if (f.functionName === "(idle)") continue;
    const where = f.url ? `${path.basename(f.url)}:${f.lineNumber + 1}` : "";
    const key = `${f.functionName || "(anonymous)"} ${where}`;
    into.set(key, (into.get(key) ?? 0) + dt);
    total += dt;
  }
  return total;
}

/** Self time summed over each stack's frames: which of our functions the time is under. */
function inclusive(p: Profile, fromUs: number, toUs: number, into: Map<string, number>): void {
  const parent = new Map<number, number>();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const byId = new Map(p.nodes.map((n) => [n.id, n] as const));
  let t = p.startTime;
  for (let i = 0; i < p.samples.length; i++) {
    t += p.timeDeltas[i]!;
    const dt = p.timeDeltas[i + 1] ?? 0;
    if (t < fromUs || t > toUs) continue;
    if (byId.get(p.samples[i]!)!.callFrame.functionName === "(idle)") continue;
    const seen = new Set<string>();
    for (let id: number | undefined = p.samples[i]; id !== undefined; id = parent.get(id)) {
      const f = byId.get(id)!.callFrame;
      if (!f.url.includes("liken") && !f.url.includes("chunk")) continue;
      const key = `${f.functionName || "(anonymous)"} ${path.basename(f.url)}:${f.lineNumber + 1}`;
      if (seen.has(key)) continue;
      seen.add(key);
      into.set(key, (into.get(key) ?? 0) + dt);
    }
  }
}

function top(m: Map<string, number>, n: number, per: number): string {
  return [...m]
    .sort((a, b) => b[1] - a[1])
    .slice(0, n)
    .map(([k, v]) => `  ${(v / 1000 / per).toFixed(1).padStart(7)} ms/min  ${k}`)
    .join("\n");
}

type Counts = Map<string, number>;
const add = (m: Counts, k: string, v = 1): void => void m.set(k, (m.get(k) ?? 0) + v);
const listed = (m: Counts, sep = " "): string =>
  [...m]
    .sort()
    .map(([k, v]) => `${k}=${v}`)
    .join(sep);

/** The bench's own watches of what the agents watch, counting events while `open`. */
async function watchAll(): Promise<{ events: Counts; open: (o: boolean) => void; stop(): void }> {
  const rest = new Rest(loadRestConfig(LAB_KUBECONFIG), "bench-profile");
  const events: Counts = new Map();
  let open = false;
  const crd = "/apis/liken.sh/v1alpha1";
  const kinds: [string, string][] = [
    ["Machine", `${crd}/machines`],
    ["Cluster", `${crd}/clusters`],
    ["Node", "/api/v1/nodes"],
    ["Lease", "/apis/coordination.k8s.io/v1/namespaces/liken-heartbeats/leases"],
  ];
  const watchers = kinds.map(
    ([kind, at]) =>
      new ResourceWatcher<{ metadata: { name: string } }>(new RestResource(rest, kind, at, "b"), {
        onChange: (ev) => open && add(events, `${kind}/${ev.object.metadata.name}`),
      }),
  );
  await Promise.all(watchers.map((w) => w.start()));
  return { events, open: (o) => (open = o), stop: () => watchers.forEach((w) => w.stop()) };
}

interface Window {
  pids: number[];
  minutes: number;
  wallFrom: number;
  wallTo: number;
}

/** The window: the agents' CPU each 5 s, their sockets, the API server's requests. */
async function idleWindow(lab: Lab, pids: number[]): Promise<Window> {
  const port = new URL(lab.controlPlane.server).port;
  const s0 = await sockets(port);
  const r0 = await requestTotals(lab);
  const th0 = pids.map(threadNs);
  const wallFrom = Date.now();
  const t0 = monoUs();
  for (const p of pids) process.kill(p, "SIGUSR2");
  log(`agents' age at the window's start: ${pids.map((p) => ageS(p).toFixed(0)).join(" ")} s`);
  const seenPorts = new Map<number, Set<string>>(pids.map((p) => [p, new Set(s0.get(p) ?? [])]));
  const series: string[] = [];
  let prev = pids.map(cpuMs);
  for (let i = 0; i < IDLE_MS / 5000; i++) {
    await sleep(5000);
    const now = pids.map(cpuMs);
    series.push(
      (((now.reduce((n, c, j) => n + c - prev[j]!, 0) / pids.length) * 60) / 5).toFixed(0),
    );
    prev = now;
    for (const [pid, ports] of await sockets(port))
      for (const p of ports) seenPorts.get(pid)?.add(p);
  }
  for (const p of pids) process.kill(p, "SIGUSR2");
  const minutes = (monoUs() - t0) / 60e6;
  const wallTo = Date.now();
  const th1 = pids.map(threadNs);
  const r1 = await requestTotals(lab);
  log(`window ${(minutes * 60).toFixed(1)} s; cpu ms/min per agent, each 5 s: ${series.join(" ")}`);
  const byThread: Counts = new Map();
  pids.forEach((_, i) => {
    for (const [k, v] of th1[i]!) add(byThread, k, v - (th0[i]!.get(k) ?? 0));
  });
  const perAgent = (v: number) => (v / 1e6 / minutes / pids.length).toFixed(1);
  log(
    `per agent per minute: ${[...byThread].map(([k, v]) => `${k}=${perAgent(v)}`).join(" ")} ` +
      "(ms on the CPU; runs: how many times a thread ran)",
  );
  log(`sockets per agent at start: ${pids.map((p) => s0.get(p)?.size ?? 0).join(" ")}`);
  const fresh = pids.map((p) => [...seenPorts.get(p)!].filter((x) => !s0.get(p)?.has(x)));
  log(`new sockets in the window per agent: ${fresh.map((f) => f.length).join(" ")}`);
  const requests: Counts = new Map();
  for (const [k, v] of r1) if (v > (r0.get(k) ?? 0)) add(requests, k, v - (r0.get(k) ?? 0));
  log(`API requests in the window: ${listed(requests, ", ")}`);
  return { pids, minutes, wallFrom, wallTo };
}

/** --trace-gc lines between the window's markers in each agent's log. */
function gcReport(machines: SimulatedMachine[], w: Window): void {
  let gcs = 0;
  let pauseMs = 0;
  const kinds: Counts = new Map();
  for (const m of machines) {
    let inWindow = false;
    for (const line of readFileSync(m.logFile, "utf8").split("\n")) {
      if (line.includes("gc window begins")) inWindow = true;
      if (line.includes("gc window ends")) inWindow = false;
      // [pid:0x...]    12345 ms: Scavenge 5.1 (6.0) -> 4.2 (6.0) MB, 0.52 / 0.00 ms  (average...
      const g = /ms: ([A-Za-z-]+)[^,]*, ([\d.]+) \/ [\d.]+ ms/.exec(line);
      if (!inWindow || !g) continue;
      gcs++;
      pauseMs += Number(g[2]);
      add(kinds, g[1]!);
    }
  }
  const per = machines.length * w.minutes;
  log(
    `gc per agent per minute: ${(gcs / per).toFixed(1)} collections, ` +
      `${(pauseMs / per).toFixed(1)} ms pause; ${listed(kinds)}`,
  );
}

/** The agents' log lines in the window, by message, and their wake-ups by cause. */
function logReport(machines: SimulatedMachine[], w: Window): void {
  const lines: Counts = new Map();
  const woken: Counts = new Map();
  for (const m of machines) {
    for (const line of readFileSync(m.logFile, "utf8").split("\n")) {
      if (!line.startsWith("{") || !line.includes('"time"')) continue;
      const l = JSON.parse(line) as { time: number; msg: string; why?: string };
      if (l.time < w.wallFrom || l.time > w.wallTo) continue;
      add(lines, l.msg);
      if (l.msg === "woken") add(woken, l.why ?? "");
    }
  }
  log(`agent log lines in the window (all agents): ${listed(lines, ", ")}`);
  log(`woken (all agents): ${listed(woken, ", ")}`);
}

function profileReport(profDir: string, w: Window): void {
  const self: Counts = new Map();
  const incl: Counts = new Map();
  let sampled = 0;
  let files = 0;
  for (const f of readdirSync(profDir)) {
    if (!f.endsWith(".cpuprofile")) continue;
    const p = JSON.parse(readFileSync(path.join(profDir, f), "utf8")) as Profile;
    files++;
    sampled += selfTime(p, 0, Infinity, self);
    inclusive(p, 0, Infinity, incl);
  }
  const per = files * w.minutes;
  log(
    `${files} profiles; sampled (not idle) ${(sampled / 1000 / per).toFixed(1)} ms/min per agent`,
  );
  log(`self time, per agent:\n${top(self, 40, per)}`);
  log(`under (inclusive, liken's frames), per agent:\n${top(incl, 40, per)}`);
}

async function main(): Promise<void> {
  const profDir = path.join(LAB_DIR, "profile");
  rmSync(profDir, { recursive: true, force: true });
  mkdirSync(profDir, { recursive: true });
  const preload = path.join(profDir, "preload.cjs");
  writeFileSync(preload, PRELOAD);
  const lab = await startLab({ machines: N, log });
  try {
    const fleet = await startFleet(lab, log, {
      ...AGENT_TIMINGS,
      env: {
        NODE_OPTIONS: `--require ${preload}`,
        LIKEN_PROFILE_DIR: profDir,
        LIKEN_PROFILE: MODE,
        LIKEN_LOG_LEVEL: "debug",
      },
    });
    const machines = [...fleet.machines.values()];
    await sleep(SETTLE_MS);
    const watch = await watchAll();
    watch.open(true);
    const w = await idleWindow(
      lab,
      machines.map((m) => m.agentPid!),
    );
    watch.open(false);
    watch.stop();
    log(`watch events in the window: ${listed(watch.events)}`);
    logReport(machines, w);
    // Each agent writes its profile (or its .done) when its window closes.
    const deadline = Date.now() + 30_000;
    const written = () => readdirSync(profDir).filter((f) => !f.startsWith("preload")).length;
    while (written() < w.pids.length && Date.now() < deadline) await sleep(200);
    if (MODE === "gc") gcReport(machines, w);
    else profileReport(profDir, w);
  } finally {
    await stopLab(lab);
  }
}

await main();
