import { Registry } from "prom-client";
import { describe, expect, it } from "vitest";
import { collectProcessMetrics } from "../../src/metrics/process.js";

describe("process metrics", () => {
  it("keeps prom-client's defaults, but no gauge ends in _total (promtool rejects it)", async () => {
    const registry = new Registry();
    collectProcessMetrics(registry);
    const metrics = await registry.getMetricsAsJSON();
    expect(metrics.some((m) => m.name === "process_cpu_seconds_total")).toBe(true);
    expect(metrics.some((m) => m.name === "nodejs_active_handles")).toBe(true);
    const misnamed = metrics.filter(
      (m) => String(m.type) !== "counter" && m.name.endsWith("_total"),
    );
    expect(misnamed.map((m) => m.name)).toEqual([]);
  });
});
