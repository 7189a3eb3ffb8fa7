// .ci/run's time report (test/support/time-report.ts): tiers from vitest runs, the budget's
// warnings naming what grew, and what a run had to build.
import { describe, expect, it } from "vitest";
import {
  budgetWarnings,
  builtRoots,
  grew,
  report,
  slowest,
  tierOf,
  tiers,
  type Budgets,
} from "../support/time-report.js";
import type { RunTimes } from "../support/time-reporter.js";

const file = (project: string, name: string, seconds: number) => ({
  project,
  file: `test/${tierOf(project)}/${name}.test.ts`,
  seconds,
  state: "passed",
});

const runs: RunTimes[] = [
  {
    projects: ["integration", "integration-operator"],
    startedAt: 2,
    seconds: 600,
    files: [
      file("integration", "api", 30),
      file("integration-operator", "operator-grace", 90),
      file("integration-operator", "fresh", 20),
    ],
  },
  { projects: ["unit"], startedAt: 1, seconds: 40, files: [file("unit", "decide", 3)] },
];

const budgets: Budgets = {
  tiers: { unit: 60, integration: 500 },
  files: { "test/integration/api.test.ts": 29, "test/integration/operator-grace.test.ts": 50 },
};

describe("the time report", () => {
  it("a tier is a project's name before its first dash", () => {
    expect(tierOf("integration-operator")).toBe("integration");
    expect(tierOf("qemu")).toBe("qemu");
  });

  it("tiers come in the order they ran, the integration tier's two projects as one", () => {
    expect(tiers(runs).map((t) => [t.tier, t.seconds, t.files.length])).toEqual([
      ["unit", 40, 1],
      ["integration", 600, 3],
    ]);
  });

  it.each([
    [undefined, 1, true],
    [50, 90, true],
    [29, 30, false],
    [10, 14, false], // 40 % more, but under 5 s
    [100, 120, false], // 5 s more, but under a quarter
  ])("reference %s s, now %s s: grew %s", (ref, now, expected) => {
    expect(grew(file("unit", "x", now), ref)).toBe(expected);
  });

  it("a tier over its budget names the files that grew, and only those", () => {
    const w = budgetWarnings(tiers(runs), budgets);
    expect(w).toHaveLength(1);
    expect(w[0]).toContain("tier integration took 600 s, over its budget of 500 s");
    expect(w[0]).toContain("test/integration/operator-grace.test.ts: 90 s (was 50 s)");
    expect(w[0]).toContain("test/integration/fresh.test.ts: 20 s (new, no reference)");
    expect(w[0]).not.toContain("api.test.ts");
  });

  it("a tier without a budget is a warning too", () => {
    expect(budgetWarnings(tiers(runs), { tiers: { integration: 900 }, files: {} })).toEqual([
      "tier unit has no budget in test/budgets.json (took 40 s)",
    ]);
  });

  it("the slowest files, across tiers", () => {
    expect(slowest(tiers(runs), 2).map((f) => f.seconds)).toEqual([90, 30]);
  });

  it("what a run built: the new entries, not each directory inside them", () => {
    expect(
      builtRoots(
        ["k8s", "k8s/v1.35.4", "k8s/v1.35.4/bin", "tools"],
        [
          "k8s",
          "k8s/v1.35.4",
          "k8s/v1.35.4/bin",
          "tools",
          "tools/helm",
          "tools/helm/v3",
          "testbed",
        ],
      ),
    ).toEqual(["tools/helm", "testbed"]);
  });

  it("the report says warm or cold, and warns", () => {
    const text = report({ runs, budgets, cacheBuilt: [], setupSeconds: 60, totalSeconds: 800 });
    expect(text).toContain("ci: caches: warm (this run built nothing)");
    expect(text).toMatch(/integration\s+600\s+500 OVER\s+3/);
    expect(text).toMatch(/typecheck, lint, npm\s+100/);
    expect(text).toContain("ci: WARNING: tier integration took 600 s");
    expect(report({ runs, budgets, cacheBuilt: ["testbed"] })).toContain(
      "ci: caches: cold, this run built: testbed",
    );
  });
});
