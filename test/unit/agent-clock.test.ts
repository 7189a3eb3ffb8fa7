// The agent's timeouts run on time since boot: it must follow /proc/uptime and stay put when
// the wall clock is stepped (NTP's first sync after a boot), or a trial would "not rejoin in
// time" seconds after it booted. Each check below fails for a clock built on Date.now().
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { afterAll, afterEach, describe, expect, it, vi } from "vitest";
import { bootClockMs } from "../../src/agent/clock.js";

const HOUR_MS = 3_600_000;

/** Steps the wall clock (Date only) by deltaMs, as an NTP step would. */
function stepWallClock(deltaMs: number): void {
  vi.setSystemTime(Date.now() + deltaMs);
}

describe("bootClockMs", () => {
  const dir = mkdtempSync(path.join(tmpdir(), "liken-clock-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  afterEach(() => {
    vi.useRealTimers();
  });

  it("reads the seconds since boot from the uptime file, and moves with it", () => {
    const f = path.join(dir, "uptime");
    writeFileSync(f, "12345.67 24000.10\n");
    expect(bootClockMs(f)).toBe(12_345_670);
    writeFileSync(f, "12405.67 24100.10\n");
    expect(bootClockMs(f)).toBe(12_405_670);
  });

  it("agrees with the real /proc/uptime", () => {
    const before = Number(readFileSync("/proc/uptime", "latin1").split(" ")[0]) * 1000;
    const t = bootClockMs();
    const after = Number(readFileSync("/proc/uptime", "latin1").split(" ")[0]) * 1000;
    expect(t).toBeGreaterThanOrEqual(Math.round(before));
    expect(t).toBeLessThanOrEqual(Math.round(after));
  });

  it("does not move when the wall clock is stepped forward or back", () => {
    const a = bootClockMs();
    stepWallClock(+HOUR_MS);
    const b = bootClockMs();
    stepWallClock(-2 * HOUR_MS);
    const c = bootClockMs();
    // Only the real time between the reads (well under a second) separates them.
    expect(b - a).toBeGreaterThanOrEqual(0);
    expect(b - a).toBeLessThan(1000);
    expect(c - b).toBeGreaterThanOrEqual(0);
    expect(c - b).toBeLessThan(1000);
  });

  it("falls back to this process's monotonic clock without an uptime file, wall clock or not", () => {
    const missing = path.join(dir, "missing");
    for (const step of [0, +HOUR_MS, -2 * HOUR_MS]) {
      stepWallClock(step);
      const before = Math.round(performance.now());
      const t = bootClockMs(missing);
      const after = Math.round(performance.now());
      expect(t).toBeGreaterThanOrEqual(before);
      expect(t).toBeLessThanOrEqual(after);
    }
  });

  it("falls back as well when the uptime file holds no number", () => {
    const f = path.join(dir, "garbage");
    writeFileSync(f, "not a number\n");
    const before = Math.round(performance.now());
    const t = bootClockMs(f);
    expect(t).toBeGreaterThanOrEqual(before);
    expect(t).toBeLessThanOrEqual(Math.round(performance.now()));
  });
});
