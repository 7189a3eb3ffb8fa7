// The process metrics prom-client collects for any Node program (CPU, memory, event loop lag,
// garbage collection, handles), minus three gauges it names like counters:
// nodejs_active_{handles,requests,resources}_total. Prometheus reserves `_total` for counters
// and `promtool check metrics` rejects them; the same numbers stay, per type, in the gauges
// without the suffix (nodejs_active_handles, ...).
import { collectDefaultMetrics, type Registry } from "prom-client";

export const MISNAMED_DEFAULTS = [
  "nodejs_active_handles_total",
  "nodejs_active_requests_total",
  "nodejs_active_resources_total",
] as const;

/**
 * `eventLoopPrecisionMs`: how often the event loop's delay is sampled (prom-client's default is
 * 10 ms). Each sample is a timer that wakes the process: at 10 ms that is 100 wake-ups a second,
 * about 300 ms of CPU per minute for a process that otherwise sleeps (measured on an idle
 * Node 20). The agent, idle on every machine of a fleet, samples once a second; a stall of the
 * loop still shows, as the lateness of that sample.
 */
export function collectProcessMetrics(
  registry: Registry,
  opts: { eventLoopPrecisionMs?: number } = {},
): void {
  collectDefaultMetrics({
    register: registry,
    ...(opts.eventLoopPrecisionMs !== undefined
      ? { eventLoopMonitoringPrecision: opts.eventLoopPrecisionMs }
      : {}),
  });
  for (const name of MISNAMED_DEFAULTS) registry.removeSingleMetric(name);
}
