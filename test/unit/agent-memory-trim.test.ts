// When the idle agent trims its malloc arenas (src/agent/memory-trim.ts).
import { describe, expect, it } from "vitest";
import { TRIM_EVERY_MS, TRIM_FIRST_MS, trimDue } from "../../src/agent/memory-trim.js";

describe("trimDue: after the start-up, then now and then, only while idle", () => {
  it.each([
    ["young, before V8's memory reducer ran", TRIM_FIRST_MS - 1, undefined, true, false],
    ["idle past the start-up, never trimmed", TRIM_FIRST_MS, undefined, true, true],
    ["a step under way", TRIM_FIRST_MS + 5_000, undefined, false, false],
    ["trimmed a minute ago", TRIM_FIRST_MS + 60_000, TRIM_FIRST_MS, true, false],
    ["trimmed one period ago", TRIM_FIRST_MS + TRIM_EVERY_MS, TRIM_FIRST_MS, true, true],
    ["one period, but busy", TRIM_FIRST_MS + TRIM_EVERY_MS, TRIM_FIRST_MS, false, false],
  ])("%s", (_why, uptimeMs, lastTrimMs, idle, due) => {
    expect(trimDue({ uptimeMs, lastTrimMs, idle })).toBe(due);
  });
});
