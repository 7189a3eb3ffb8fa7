// bench:agent-profile — where an idle agent's CPU goes, measured (a companion of bench:agent).
//
// The same lab as bench:agent (its control plane, both operators, N real agents at the
// production timings), but each agent runs under V8's sampling profiler (--cpu-prof). Over an
// idle window of IDLE_MS it records, per agent: CPU (utime+stime from /proc), the watch events
// its Machine, its Cluster and its Node received (the bench watches the same objects), its
// connections to the API server (new local ports are new TLS handshakes), and its "woken"
// log lines; and for the API server, requests by verb and resource. Then the agents stop
// (SIGTERM, so each writes its profile) and the samples inside the window are summed by
// function: self time, the top of the list printed.
//   BENCH_MACHINES (default 5), BENCH_IDLE_MS (default 60000), BENCH_SETTLE_MS (default 15000)
import { execFile } from "node:child_process";
import { mkdirSync, readdirSync, readFileSync, rmSync } from "node:fs";
import path from "node:path";
import { promisify } from "node:util";
import { loadRestConfig, Rest } from "../src/api/rest.js";
import { RestResource } from "../src/api/rest-resource.js";
import { ResourceWatcher } from "../src/api/watch.js";
import {
  LAB_CLUSTER,
  LAB_DIR,
  LAB_KUBECONFIG,
  startLab,
  stopLab,
  type Lab,
} from "../src/lab/lab.js";
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

async function main(): Promise<void> {
  const profDir = path.join(LAB_DIR, "profile");
  rmSync(profDir, { recursive: true, force: true });
  mkdirSync(profDir, { recursive: true });
  const lab = await startLab({ machines: N, log });
  try {
    await profile(lab, profDir);
  } finally {
    await stopLab(lab);
  }
}

async function profile(lab: Lab, profDir: string): Promise<void> {
  const fleet = await startFleet(lab, log, {
    ...AGENT_TIMINGS,
    env: {
      NODE_OPTIONS: `--require ${path.resolve("bench/agent-profile-preload.cjs")}`,
      LIKEN_PROFILE_DIR: profDir,
      LIKEN_PROFILE: MODE,
      LIKEN_LOG_LEVEL: "debug",
    },
  });
  const machines = [...fleet.machines.values()];
  await sleep(SETTLE_MS);
  const port = new URL(lab.controlPlane.server).port;

  // What each agent's watches receive: the bench watches the same objects.
  const rest = new Rest(loadRestConfig(LAB_KUBECONFIG), "bench-profile");
  const events = new Map<string, number>();
  const count = (kind: string) => ({
    onChange: (ev: { object: { metadata: { name: string } } }) => {
      if (!open) return;
      const k = `${kind}/${ev.object.metadata.name}`;
      events.set(k, (events.get(k) ?? 0) + 1);
    },
  });
  let open = false;
  const crd = "/apis/liken.sh/v1alpha1";
  const watchers = [
    new ResourceWatcher(
      new RestResource(rest, "Machine", `${crd}/machines`, "b"),
      count("Machine"),
    ),
    new ResourceWatcher(
      new RestResource(rest, "Cluster", `${crd}/clusters`, "b"),
      count("Cluster"),
    ),
    new ResourceWatcher(new RestResource(rest, "Node", "/api/v1/nodes", "b"), count("Node")),
    new ResourceWatcher(
      new RestResource(
        rest,
        "Lease",
        "/apis/coordination.k8s.io/v1/namespaces/liken-heartbeats/leases",
        "b",
      ),
      count("Lease"),
    ),
  ];
  await Promise.all(watchers.map((w) => w.start()));

  const pids = machines.map((m) => m.agentPid!);
  const s0 = await sockets(port);
  const r0 = await requestTotals(lab);
  const c0 = pids.map(cpuMs);
  const th0 = pids.map(threadNs);
  const w0 = Date.now();
  const t0 = monoUs();
  open = true;
  for (const p of pids) process.kill(p, "SIGUSR2");
  const seenPorts = new Map<number, Set<string>>(pids.map((p) => [p, new Set(s0.get(p) ?? [])]));
  const series: string[] = [];
  let prev = pids.map(cpuMs);
  log(`agents' age at the window's start: ${pids.map((p) => ageS(p).toFixed(0)).join(" ")} s`);
  for (let i = 0; i < IDLE_MS / 5000; i++) {
    await sleep(5000);
    const now = pids.map(cpuMs);
    const ms = now.reduce((n, c, j) => n + c - prev[j]!, 0) / pids.length;
    series.push(((ms * 60) / 5).toFixed(0));
    prev = now;
    for (const [pid, ports] of await sockets(port))
      for (const p of ports) seenPorts.get(pid)?.add(p);
  }
  open = false;
  for (const p of pids) process.kill(p, "SIGUSR2");
  const t1 = monoUs();
  const w1 = Date.now();
  const c1 = pids.map(cpuMs);
  const th1 = pids.map(threadNs);
  const r1 = await requestTotals(lab);
  for (const w of watchers) w.stop();
  const minutes = (t1 - t0) / 60e6;

  log(`window ${((t1 - t0) / 1e6).toFixed(1)} s`);
  log(`cpu ms/min per agent, each 5 s of the window: ${series.join(" ")}`);
  log(
    `cpu ms/min per agent: ${pids.map((p, i) => ((c1[i]! - c0[i]!) / minutes).toFixed(0)).join(" ")}`,
  );
  const byThread = new Map<string, number>();
  pids.forEach((_, i) => {
    for (const [name, ns] of th1[i]!) {
      byThread.set(name, (byThread.get(name) ?? 0) + ns - (th0[i]!.get(name) ?? 0));
    }
  });
  log(
    `schedstat ms/min per agent by thread: ${[...byThread]
      .map(([k, v]) => `${k}=${(v / 1e6 / minutes / pids.length).toFixed(1)}`)
      .join(
        " ",
      )} (total ${([...byThread.values()].reduce((a, b) => a + b, 0) / 1e6 / minutes / pids.length).toFixed(1)})`,
  );
  log(`sockets per agent at start: ${pids.map((p) => s0.get(p)?.size ?? 0).join(" ")}`);
  log(
    `new sockets in the window per agent: ${pids.map((p) => [...seenPorts.get(p)!].filter((x) => !s0.get(p)?.has(x)).length).join(" ")}`,
  );
  log(
    `API requests in the window: ${[...r1]
      .map(([k, v]) => [k, v - (r0.get(k) ?? 0)] as const)
      .filter(([, v]) => v > 0)
      .sort((a, b) => b[1] - a[1])
      .map(([k, v]) => `${k}=${v}`)
      .join(", ")}`,
  );
  log(
    `watch events in the window: ${[...events]
      .sort()
      .map(([k, v]) => `${k}=${v}`)
      .join(" ")}`,
  );
  let gcs = 0;
  let gcMs = 0;
  const kinds = new Map<string, number>();
  for (const m of machines) {
    let inWindow = false;
    for (const line of readFileSync(m.logFile, "utf8").split("\n")) {
      if (line.includes("gc window begins")) inWindow = true;
      if (line.includes("gc window ends")) inWindow = false;
      // [pid:0x...]    12345 ms: Scavenge 5.1 (6.0) -> 4.2 (6.0) MB, 0.52 / 0.00 ms  (average mu = ...
      const g = /ms: ([A-Za-z-]+(?: \([^)]*\))?)[^,]*, ([\d.]+) \/ ([\d.]+) ms/.exec(line);
      if (!inWindow || !g) continue;
      gcs++;
      gcMs += Number(g[2]);
      const kind = g[1]!.split(" ")[0]!;
      kinds.set(kind, (kinds.get(kind) ?? 0) + 1);
    }
  }
  if (MODE === "gc") {
    log(
      `gc per agent per minute: ${(gcs / machines.length / minutes).toFixed(1)} collections, ` +
        `${(gcMs / machines.length / minutes).toFixed(1)} ms pause; kinds ${[...kinds].map(([k, v]) => `${k}=${v}`).join(" ")}`,
    );
  }
  const woken = new Map<string, number>();
  const lines = new Map<string, number>();
  for (const m of machines) {
    for (const line of readFileSync(m.logFile, "utf8").split("\n")) {
      if (!line.startsWith("{") || !line.includes('"time"')) continue;
      const l = JSON.parse(line) as { time: number; msg: string; why?: string };
      if (l.time < w0 || l.time > w1) continue;
      lines.set(l.msg, (lines.get(l.msg) ?? 0) + 1);
      if (l.msg === "woken") woken.set(l.why ?? "", (woken.get(l.why ?? "") ?? 0) + 1);
    }
  }
  log(
    `agent log lines in the window (all agents): ${[...lines].map(([k, v]) => `${k}=${v}`).join(", ")}`,
  );
  log(`woken (all agents): ${[...woken].map(([k, v]) => `${k}=${v}`).join(", ")}`);

  // Each agent writes its profile when told to stop profiling.
  const deadline = Date.now() + 30_000;
  while (readdirSync(profDir).length < pids.length && Date.now() < deadline) await sleep(200);
  await Promise.all(machines.map((m) => m.stop()));
  const self = new Map<string, number>();
  const incl = new Map<string, number>();
  let sampled = 0;
  let files = 0;
  for (const f of readdirSync(profDir)) {
    if (!f.endsWith(".cpuprofile")) continue;
    const p = JSON.parse(readFileSync(path.join(profDir, f), "utf8")) as Profile;
    files++;
    sampled += selfTime(p, 0, Infinity, self);
    inclusive(p, 0, Infinity, incl);
  }
  const per = files * minutes;
  log(
    `${files} profiles; sampled (not idle) ${(sampled / 1000 / per).toFixed(1)} ms/min per agent`,
  );
  log(`self time, per agent:\n${top(self, 40, per)}`);
  log(`under (inclusive, liken's frames), per agent:\n${top(incl, 40, per)}`);
}

await main();
