// Nothing a lab starts may outlive it, however it ends (Ctrl-C through a pipe, SIGTERM, a
// closed stdout, SIGKILL of the lab itself). Three parts:
//   - the lab's claim: .lab/lab.pid names the running lab (pid and kernel start time, so a
//     recycled pid is never mistaken for it); a second lab refuses to start beside a live one;
//   - reapLab(): stops the lab's control plane (in order, as `down` does) and kills every
//     process whose command line names the lab's files (agents, their downloads, operators,
//     any control-plane component left without a state file). Found by what they are, not
//     by a list the dead lab might not have finished writing;
//   - a reaper process (reaper.ts), in its own process group, that waits for the lab to die
//     and reaps what it left, unless the lab cleaned up itself or a new lab claimed the place.
// Every lab start reaps first, so even a lab whose reaper was killed too leaves nothing for long.
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { down } from "../controlplane/instance.js";
import { REPO_ROOT } from "../controlplane/paths.js";
import { LikenError } from "../errors.js";
import { LAB_CLUSTER, LAB_PID_FILE, LAB_RING_PLANE, labMarks } from "./paths.js";

/** A process, told apart from a later one with the same pid by its kernel start time. */
export interface ProcessStamp {
  pid: number;
  start: string;
}

/** Field 22 of /proc/PID/stat (clock ticks since boot); undefined when the pid is gone. */
export function startTimeOf(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // The command name (field 2) may hold spaces and parentheses: count from the last ")".
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19];
  } catch {
    return undefined;
  }
}

export function isRunning(p: ProcessStamp): boolean {
  return startTimeOf(p.pid) === p.start;
}

export function selfStamp(): ProcessStamp {
  return { pid: process.pid, start: startTimeOf(process.pid) ?? "" };
}

export function readClaim(file = LAB_PID_FILE): ProcessStamp | undefined {
  try {
    const [pid, start] = readFileSync(file, "utf8").trim().split(" ");
    return { pid: Number(pid), start: start ?? "" };
  } catch {
    return undefined;
  }
}

/** Makes this process the lab; refuses when another lab still runs. */
export function claimLab(file = LAB_PID_FILE): void {
  const prev = readClaim(file);
  if (prev !== undefined && prev.pid !== process.pid && isRunning(prev)) {
    throw new LikenError(
      "LIKEN_LAB_RUNNING",
      `a lab is already running (pid ${prev.pid}, ${file}); stop it with Ctrl-C in its terminal or \`kill ${prev.pid}\`, then start again`,
    );
  }
  const me = selfStamp();
  // A fresh clone has no .lab/ yet: the claim is the first thing a lab writes.
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, `${me.pid} ${me.start}\n`);
}

/** Gives the place up, if this process (or `owner`) still holds it. */
export function releaseClaim(owner: ProcessStamp = selfStamp(), file = LAB_PID_FILE): void {
  const cur = readClaim(file);
  if (cur?.pid === owner.pid && cur.start === owner.start) rmSync(file, { force: true });
}

/**
 * The programs a lab runs: node (agents, their downloads, operators) and the control plane's
 * components. A person's `tail -f .lab/lab/machines/node-1/agent.log` names the lab's files
 * too, and is none of the lab's business.
 */
const LAB_PROGRAMS = new Set([
  "node",
  "etcd",
  "kube-apiserver",
  "kube-controller-manager",
  "kube-scheduler",
  "kwok",
]);

function isLabProgram(argv0: string): boolean {
  return argv0 === process.execPath || LAB_PROGRAMS.has(path.basename(argv0));
}

/** Every process but this one that runs a lab program and names the lab's files. */
export function labProcesses(): number[] {
  const marks = labMarks();
  const found: number[] = [];
  for (const entry of readdirSync("/proc")) {
    const pid = Number(entry);
    if (!Number.isInteger(pid) || pid === process.pid) continue;
    let cmdline: string;
    try {
      cmdline = readFileSync(`/proc/${pid}/cmdline`, "utf8");
    } catch {
      continue; // gone while we looked
    }
    if (isLabProgram(cmdline.split("\0")[0] ?? "") && marks.some((m) => cmdline.includes(m)))
      found.push(pid);
  }
  return found;
}

/** How long killed processes get to disappear (SIGKILL is not refused; zombies are reaped). */
const GONE_DEADLINE_MS = 10_000;

/**
 * Ends everything a lab started that still runs; returns how many processes it killed.
 * The control plane first, in order; then the rest by SIGKILL: a lab that is being reaped
 * is gone or giving up, so no agent step is left to finish (its next start wipes the files).
 */
export async function reapLab(log: (l: string) => void = () => {}): Promise<number> {
  await down(LAB_CLUSTER);
  await down(LAB_RING_PLANE);
  const pids = labProcesses();
  for (const pid of pids) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // gone between the scan and the kill
    }
  }
  const deadline = Date.now() + GONE_DEADLINE_MS;
  while (pids.some((p) => existsSync(`/proc/${p}`) && startTimeOf(p) !== undefined)) {
    if (Date.now() > deadline) break;
    await sleep(50);
  }
  if (pids.length > 0)
    log(`liken lab: ended ${pids.length} processes a previous lab left (pids ${pids.join(", ")})`);
  return pids.length;
}

/**
 * Starts the reaper for this lab: its own process group (Ctrl-C on the terminal does not
 * reach it), stdio closed (a broken pipe cannot kill it). Returns how to stop it once the lab
 * has cleaned up by itself.
 */
export function startReaper(): () => void {
  const me = selfStamp();
  const child = spawn(
    process.execPath,
    ["--import", "tsx", path.join(REPO_ROOT, "src", "lab", "reaper.ts"), String(me.pid), me.start],
    { detached: true, stdio: "ignore", cwd: REPO_ROOT },
  );
  child.unref();
  return () => {
    try {
      if (child.pid !== undefined) process.kill(child.pid, "SIGTERM");
    } catch {
      // already gone
    }
  };
}
