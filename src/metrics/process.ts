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

export function collectProcessMetrics(registry: Registry): void {
  collectDefaultMetrics({ register: registry });
  for (const name of MISNAMED_DEFAULTS) registry.removeSingleMetric(name);
}
