import { describe, expect, it } from "vitest";
import { parseBudget } from "../../src/operator/turns/budget.js";
import { compareVersions, newest, oldest } from "../../src/release-decision/version-order.js";

describe("parseBudget", () => {
  const cases: [number | string | undefined, number, number, boolean][] = [
    [undefined, 10, 1, true],
    [1, 10, 1, true],
    [3, 2, 3, true],
    ["3", 10, 3, true],
    ["10%", 1000, 100, true],
    ["10%", 5, 1, true],
    ["1%", 1, 1, true],
    ["34%", 3, 2, true],
    ["100%", 7, 7, true],
    ["50%", 0, 1, true],
    [0, 10, 1, false],
    [-2, 10, 1, false],
    [1.5, 10, 1, false],
    ["0%", 10, 1, false],
    ["101%", 10, 1, false],
    ["ten", 10, 1, false],
  ];
  for (const [value, total, budget, ok] of cases) {
    it(`${JSON.stringify(value)} of ${total} machines = ${budget}`, () => {
      const b = parseBudget(value, total);
      expect(b.budget).toBe(budget);
      expect(b.ok).toBe(ok);
    });
  }
});

describe("parseBudget: what it says", () => {
  it.each([
    { value: undefined, total: 3, budget: 1, text: "1 (default)" },
    { value: 2, total: 3, budget: 2, text: "2" },
    { value: "12", total: 3, budget: 12, text: "12" },
    { value: "50%", total: 5, budget: 3, text: "50% of 5 machines = 3" },
    {
      value: "100%",
      total: 3000,
      budget: 1024,
      text: "100% of 3000 machines = 3000, capped at 1024 (the most turns status.rebootTurns holds)",
    },
    {
      value: 5000,
      total: 10,
      budget: 1024,
      text: "5000, capped at 1024 (the most turns status.rebootTurns holds)",
    },
    { value: "1024", total: 10, budget: 1024, text: "1024" },
  ])("$value of $total: budget $budget, text $text", ({ value, total, budget, text }) => {
    expect(parseBudget(value, total)).toEqual({ ok: true, budget, text });
  });

  it.each([
    { value: 0, want: "an integer of at least 1" },
    { value: "10%x", want: 'an integer of at least 1 or a percentage from "1%" to "100%"' },
    { value: "x3", want: 'an integer of at least 1 or a percentage from "1%" to "100%"' },
    { value: "3x", want: 'an integer of at least 1 or a percentage from "1%" to "100%"' },
  ])("refuses $value, says why, and falls back to 1", ({ value, want }) => {
    expect(parseBudget(value, 10)).toEqual({
      ok: false,
      budget: 1,
      text: "1 (fallback)",
      problem: `spec.disruption.maxUnavailable ${JSON.stringify(value)} is not ${want}; cluster-operator uses 1 until it is fixed`,
    });
  });
});

describe("compareVersions", () => {
  it("orders liken versions naturally", () => {
    const vs = ["2026.10.12-001", "2026.9.30-002", "2026.10.10-010", "2026.10.10-002"];
    expect([...vs].sort(compareVersions)).toEqual([
      "2026.9.30-002",
      "2026.10.10-002",
      "2026.10.10-010",
      "2026.10.12-001",
    ]);
    expect(oldest(vs)).toBe("2026.9.30-002");
    expect(newest(vs)).toBe("2026.10.12-001");
    expect(compareVersions("1.0", "1.0")).toBe(0);
    expect(compareVersions("1.0", "1.0.1")).toBeLessThan(0);
  });
});
