// Whether anything a scenario started still runs: every process whose command line names one
// of the scenario's marks (its run directory, its control plane's data directory, the loopback
// ports its guest forwards reach). Read from /proc, as src/lab/reap.ts finds a lab's processes.
import { readdirSync, readFileSync } from "node:fs";

export function processesNaming(marks: readonly string[]): string[] {
  const found: string[] = [];
  for (const entry of readdirSync("/proc")) {
    const pid = Number(entry);
    if (!Number.isInteger(pid) || pid === process.pid) continue;
    let cmdline: string;
    try {
      cmdline = readFileSync(`/proc/${pid}/cmdline`, "utf8").replaceAll("\0", " ").trim();
    } catch {
      continue; // gone while we looked
    }
    if (marks.some((m) => cmdline.includes(m))) found.push(`${pid} ${cmdline.slice(0, 160)}`);
  }
  return found;
}
