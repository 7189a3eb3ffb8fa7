// A process killed by the torture and started again "as its supervisor would": the same
// command line, working directory and environment it had, read from /proc before the kill,
// its output appended to the log it wrote before.
import { spawn } from "node:child_process";
import { closeSync, openSync, readFileSync, readlinkSync } from "node:fs";

export interface ProcessImage {
  argv: string[];
  cwd: string;
  env: NodeJS.ProcessEnv;
}

/** What /proc says about a running process: enough to start it again. */
export function imageOf(pid: number): ProcessImage {
  const split = (file: string): string[] =>
    readFileSync(`/proc/${pid}/${file}`, "latin1")
      .split("\0")
      .filter((s) => s !== "");
  const env: NodeJS.ProcessEnv = {};
  for (const kv of split("environ")) {
    const i = kv.indexOf("=");
    if (i > 0) env[kv.slice(0, i)] = kv.slice(i + 1);
  }
  return { argv: split("cmdline"), cwd: readlinkSync(`/proc/${pid}/cwd`), env };
}

/** Starts the image again, detached, its output appended to `logFile`; returns its pid. */
export function respawn(image: ProcessImage, logFile: string): number {
  const fd = openSync(logFile, "a");
  try {
    const [program, ...args] = image.argv;
    const child = spawn(program!, args, {
      cwd: image.cwd,
      env: image.env,
      stdio: ["ignore", fd, fd],
      detached: true,
    });
    child.unref();
    return child.pid ?? 0;
  } finally {
    closeSync(fd);
  }
}

/** Sends `signal`; a process already gone is no error (it may have died on its own). */
export function signal(pid: number, sig: NodeJS.Signals, group = false): boolean {
  try {
    process.kill(group ? -pid : pid, sig);
    return true;
  } catch {
    return false;
  }
}
