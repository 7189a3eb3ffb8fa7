import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { bootClockMs } from "../../src/agent/clock.js";

describe("bootClockMs", () => {
  const dir = mkdtempSync(path.join(tmpdir(), "liken-clock-"));

  it("reads the seconds since boot from the uptime file", () => {
    const f = path.join(dir, "uptime");
    writeFileSync(f, "12345.67 24000.10\n");
    expect(bootClockMs(f)).toBe(12_345_670);
  });

  it("ignores the wall clock: the real /proc/uptime is below any epoch time", () => {
    const t = bootClockMs();
    expect(t).toBeGreaterThan(0);
    expect(t).toBeLessThan(Date.now() / 10);
  });

  it("falls back to a monotonic process clock without an uptime file", () => {
    const a = bootClockMs(path.join(dir, "missing"));
    const b = bootClockMs(path.join(dir, "missing"));
    expect(b).toBeGreaterThanOrEqual(a);
  });
});
