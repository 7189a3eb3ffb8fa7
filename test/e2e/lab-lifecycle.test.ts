// Nothing the lab started outlives it, however it ends, checked by pid from outside:
//   - `npm run lab 2>&1 | tee lab.log` and Ctrl-C (SIGINT to the whole process group, tee
//     included: the lab's next write meets a broken pipe);
//   - SIGKILL of the lab process itself (its reaper ends what it left);
//   - SIGKILL of the lab and its reaper: the next `npm run lab` ends what the old one left.
// The pids are taken while the lab runs: its agents (and their download children), its two
// operator copies, its control plane (state.json), its reaper, and the lab itself.
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, readFileSync, readdirSync } from "node:fs";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { tempDir } from "../support/temp-dir.js";
import { clustersDir, REPO_ROOT } from "../../src/controlplane/paths.js";
import { LAB_CLUSTER } from "../../src/lab/lab.js";
import { LAB_PID_FILE, LAB_REAPER_LOG } from "../../src/lab/paths.js";
import { labProcesses, readClaim, startTimeOf } from "../../src/lab/reap.js";
import { waitFor } from "../support/kube.js";

const groups: ChildProcess[] = [];
afterAll(() => {
  // A failed case must not leave its lab to the next: Ctrl-C its group, as a person would.
  for (const g of groups) {
    try {
      process.kill(-g.pid!, "SIGINT");
    } catch {
      // gone
    }
  }
});

const MACHINES = "3";
const READY_MS = 300_000;
const GONE_MS = 60_000;

interface Proc {
  pid: number;
  start: string;
  cmd: string;
}

function proc(pid: number): Proc | undefined {
  const start = startTimeOf(pid);
  if (start === undefined) return undefined;
  try {
    const cmd = readFileSync(`/proc/${pid}/cmdline`, "utf8").replace(/\0/g, " ").trim();
    return { pid, start, cmd };
  } catch {
    return undefined;
  }
}

/** Alive and the same process (not a recycled pid), and not a zombie waiting to be reaped. */
function alive(p: Proc): boolean {
  if (startTimeOf(p.pid) !== p.start) return false;
  try {
    const stat = readFileSync(`/proc/${p.pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[0] !== "Z";
  } catch {
    return false;
  }
}

function reaperOf(labPid: number): Proc | undefined {
  for (const e of readdirSync("/proc")) {
    const p = /^\d+$/.test(e) ? proc(Number(e)) : undefined;
    if (p?.cmd.includes(path.join("src", "lab", "reaper.ts")) && p.cmd.includes(` ${labPid} `))
      return p;
  }
  return undefined;
}

/** Everything the running lab started, by pid, plus the lab and its reaper. */
function labPids(): { lab: Proc; reaper: Proc; all: Proc[] } {
  const claim = readClaim();
  if (claim === undefined) throw new Error(`no ${LAB_PID_FILE}`);
  const lab = proc(claim.pid)!;
  const reaper = reaperOf(claim.pid);
  if (reaper === undefined) throw new Error(`no reaper for lab pid ${claim.pid}`);
  const state = JSON.parse(
    readFileSync(path.join(clustersDir(), LAB_CLUSTER, "state.json"), "utf8"),
  ) as { processes: { pid: number }[] };
  const pids = new Set([...labProcesses(), ...state.processes.map((p) => p.pid)]);
  const all = [...pids].map(proc).filter((p): p is Proc => p !== undefined);
  return { lab, reaper, all: [lab, reaper, ...all] };
}

function startLab(shell: string, log: string): ChildProcess {
  const child = spawn("bash", ["-c", shell], {
    cwd: REPO_ROOT,
    stdio: ["ignore", "ignore", "ignore"],
    // Its own process group, as in a terminal, where Ctrl-C signals the whole group.
    detached: true,
    env: { ...process.env, LAB_LOG: log },
  });
  groups.push(child);
  return child;
}

async function untilRunning(log: string): Promise<void> {
  await waitFor(
    "the lab to start its operators",
    async () => existsSync(log) && readFileSync(log, "utf8").includes("cluster-operator started"),
    { timeoutMs: READY_MS, intervalMs: 500 },
  );
}

/** `procs` all ended, and (unless a new lab runs) no process names the lab's files. */
async function untilGone(what: string, procs: Proc[], newLabRuns = false): Promise<void> {
  await waitFor(
    what,
    async () => procs.every((p) => !alive(p)) && (newLabRuns || labProcesses().length === 0),
    { timeoutMs: GONE_MS, intervalMs: 200 },
  ).catch((e: Error) => {
    const left = procs.filter(alive).map((p) => `${p.pid} ${p.cmd.slice(0, 160)}`);
    throw new Error(`${e.message}; still running:\n${left.join("\n")}`);
  });
}

/** Whether the reaper of the lab with this pid had to end what it left. */
function reaped(labPid: number): boolean {
  if (!existsSync(LAB_REAPER_LOG)) return false;
  return readFileSync(LAB_REAPER_LOG, "utf8").includes(`lab pid ${labPid} ended without stopping`);
}

const dir = tempDir("liken-lab-lifecycle-");

describe("the lab leaves nothing running", () => {
  it("after Ctrl-C through a pipe (`npm run lab 2>&1 | tee lab.log`)", async () => {
    const log = path.join(dir, "pipe.log");
    const g = startLab(`npm run -s lab -- --machines ${MACHINES} 2>&1 | tee "$LAB_LOG"`, log);
    await untilRunning(log);
    const { lab, reaper, all } = labPids();
    const agents = all.filter((p) => p.cmd.includes(" agent run "));
    const operators = all.filter((p) => p.cmd.includes(" operator "));
    expect(agents).toHaveLength(Number(MACHINES));
    expect(operators).toHaveLength(2);
    expect(all.filter((p) => /kube-apiserver|etcd|kwok/.test(p.cmd)).length).toBeGreaterThan(2);

    process.kill(-g.pid!, "SIGINT");
    await untilGone("every process of the lab to end after Ctrl-C", all);
    expect(alive(lab)).toBe(false);
    expect(alive(reaper)).toBe(false);
    // It stopped everything itself, broken pipe and all: its reaper had nothing to do.
    expect(existsSync(LAB_PID_FILE)).toBe(false);
    expect(reaped(lab.pid)).toBe(false);
  });

  it("after SIGKILL of the lab process itself: its reaper ends the rest", async () => {
    const log = path.join(dir, "sigkill.log");
    startLab(`npm run -s lab -- --machines ${MACHINES} > "$LAB_LOG" 2>&1`, log);
    await untilRunning(log);
    const { lab, reaper, all } = labPids();
    expect(all.filter((p) => p.cmd.includes(" agent run "))).toHaveLength(Number(MACHINES));

    process.kill(lab.pid, "SIGKILL");
    await untilGone("every process of the SIGKILLed lab to end", all);
    await waitFor("the reaper to exit", async () => !alive(reaper), { timeoutMs: GONE_MS });
    expect(reaped(lab.pid)).toBe(true);
  });

  it("after SIGKILL of the lab and its reaper: the next start ends what they left", async () => {
    const log = path.join(dir, "orphans.log");
    startLab(`npm run -s lab -- --machines ${MACHINES} > "$LAB_LOG" 2>&1`, log);
    await untilRunning(log);
    const { lab, reaper, all } = labPids();
    process.kill(reaper.pid, "SIGKILL");
    process.kill(lab.pid, "SIGKILL");
    const orphans = all.filter((p) => p !== lab && p !== reaper);
    // Nobody is left to end them: the agents and operators run on, orphaned (the old bug).
    expect(orphans.filter(alive).length).toBeGreaterThan(Number(MACHINES));

    const next = path.join(dir, "next.log");
    const g = startLab(`npm run -s lab -- --machines ${MACHINES} > "$LAB_LOG" 2>&1`, next);
    await untilGone("the next lab to end the old one's processes", orphans, true);
    // It says so once they are gone (its log line follows the kills).
    await waitFor(
      "the next lab to say it ended the old one's processes",
      async () => /ended \d+ processes a previous lab left/.test(readFileSync(next, "utf8")),
      { timeoutMs: GONE_MS, intervalMs: 200 },
    );
    await untilRunning(next);
    const second = labPids();
    process.kill(-g.pid!, "SIGINT");
    await untilGone("the second lab to end on Ctrl-C", second.all);
  });
});
