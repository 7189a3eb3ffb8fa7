// The clock every agent timeout runs on: milliseconds since boot (CLOCK_BOOTTIME, read from
// /proc/uptime), not the wall clock. A machine that just booted often jumps its wall clock
// when NTP syncs; a timeout measured on Date.now() would then fire at once (a trial "did not
// rejoin" seconds after it booted) or never. Since-boot time only moves forward, also across
// restarts of the agent within one boot, which is when a persisted start time (trialSeenAt)
// is read again.
import { readFileSync } from "node:fs";
import { performance } from "node:perf_hooks";

export function bootClockMs(uptimeFile = "/proc/uptime"): number {
  try {
    const first = readFileSync(uptimeFile, "latin1").split(" ")[0] ?? "";
    const s = Number(first);
    if (Number.isFinite(s) && s >= 0) return Math.round(s * 1000);
  } catch {
    // Not Linux: fall back to this process's monotonic clock (persisted times then restart).
  }
  return Math.round(performance.now());
}
