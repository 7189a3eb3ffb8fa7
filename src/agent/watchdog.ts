// systemd's service watchdog, read as sd_watchdog_enabled(3) reads it: WATCHDOG_USEC is the
// unit's WatchdogSec, and WATCHDOG_PID, when set, must name this process (a child that
// inherited the variables is not the service). No watchdog, no timer: the lab's agents and one
// run from a shell are not woken every few seconds for nothing, and an idle agent's cost is
// its wake-ups (docs/agent.md).

/** Feeding at most this far apart keeps the slack that a TCG guest under load has needed. */
const MAX_PERIOD_MS = 5_000;

/**
 * How often to send WATCHDOG=1: half the interval (what systemd.service(5) asks), at most
 * 5 s; undefined when systemd does not watch this process.
 */
export function watchdogPeriodMs(
  env: NodeJS.ProcessEnv = process.env,
  pid: number = process.pid,
): number | undefined {
  const usec = Number(env.WATCHDOG_USEC);
  if (env.WATCHDOG_USEC === undefined || !Number.isSafeInteger(usec) || usec <= 0) return undefined;
  if (env.WATCHDOG_PID !== undefined && Number(env.WATCHDOG_PID) !== pid) return undefined;
  return Math.max(1, Math.min(MAX_PERIOD_MS, Math.floor(usec / 2000)));
}
