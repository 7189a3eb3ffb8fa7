// What a test file left running: the processes that descend from its vitest worker once the
// file's own afterAll hooks are done. Files run side by side (vitest.config.ts), each in a
// worker of its own, so a process under this worker is this file's and no other's. Read from
// /proc, as src/lab/reap.ts and test/qemu/leftovers.ts find processes.
import { readdirSync, readFileSync } from "node:fs";

export interface ProcessSeen {
  pid: number;
  ppid: number;
  state: string;
  cmdline: string;
}

/** Every process on the machine, with its parent and state (zombies included). */
export function processTable(): ProcessSeen[] {
  const seen: ProcessSeen[] = [];
  for (const entry of readdirSync("/proc")) {
    const pid = Number(entry);
    if (!Number.isInteger(pid)) continue;
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so read past the last ")".
      const [state = "?", ppid = "0"] = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      const cmdline = readFileSync(`/proc/${pid}/cmdline`, "utf8").replaceAll("\0", " ").trim();
      seen.push({ pid, ppid: Number(ppid), state, cmdline });
    } catch {
      // gone while we looked
    }
  }
  return seen;
}

/**
 * Processes below `root` (not `root` itself) that still run: zombies are ended, only not yet
 * reaped. `ignore` names helpers a worker keeps for its own life (esbuild's service).
 */
export function descendants(
  root: number,
  table: readonly ProcessSeen[],
  ignore: (p: ProcessSeen) => boolean = () => false,
): ProcessSeen[] {
  const below = new Set([root]);
  const found: ProcessSeen[] = [];
  // Parents before children is not guaranteed by pid order (pids wrap): repeat until stable.
  for (let grew = true; grew;) {
    grew = false;
    for (const p of table) {
      if (below.has(p.pid) || !below.has(p.ppid)) continue;
      below.add(p.pid);
      grew = true;
      if (p.state !== "Z" && !ignore(p)) found.push(p);
    }
  }
  return found;
}

/** esbuild's service process lives as long as the worker that bundled something. */
export function workerHelper(p: ProcessSeen): boolean {
  return /esbuild\S*\s.*--service/.test(p.cmdline);
}

/** One line per process, for a failure message. */
export function describeProcesses(ps: readonly ProcessSeen[]): string {
  return ps.map((p) => `  pid ${p.pid}: ${p.cmdline.slice(0, 200)}`).join("\n");
}
