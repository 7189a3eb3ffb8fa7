// A lock between processes on one machine: a directory created atomically, holding the
// owner's pid. A lock whose owner is gone (killed test runner) is taken over.
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";

export function pidAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM";
  }
}

function tryTake(dir: string): boolean {
  try {
    mkdirSync(dir);
    writeFileSync(path.join(dir, "pid"), String(process.pid));
    return true;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e;
    let owner = 0;
    try {
      owner = Number(readFileSync(path.join(dir, "pid"), "utf8"));
    } catch {
      // Created but pid not yet written: treat as held, look again shortly.
      return false;
    }
    if (!pidAlive(owner)) rmSync(dir, { recursive: true, force: true });
    return false;
  }
}

export async function withLock<T>(
  dir: string,
  log: (l: string) => void,
  fn: () => Promise<T>,
): Promise<T> {
  let waitedSince = 0;
  while (!tryTake(dir)) {
    if (waitedSince === 0) {
      waitedSince = Date.now();
      log(`liken: waiting for another process that holds ${dir}`);
    }
    await sleep(1000);
  }
  try {
    return await fn();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
