// src/deploy/monitoring.ts: the shipped rule and dashboard read as data, Grafana's variables
// expanded to their "All" value, and refusals that name the file and what to do.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import {
  alertNames,
  dashboardQueries,
  expandVariables,
  ruleGroups,
} from "../../src/deploy/monitoring.js";

const dir = mkdtempSync(path.join(tmpdir(), "liken-monitoring-unit-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const file = (name: string, text: string): string => {
  const f = path.join(dir, name);
  writeFileSync(f, text);
  return f;
};

describe("the shipped alerts and dashboard", () => {
  it("name the alerts docs/alerts.md describes, each with a summary, a description and a severity", () => {
    const groups = ruleGroups();
    expect(alertNames(groups)).toEqual([
      "LikenRolloutStalled",
      "LikenReleaseFailed",
      "LikenMachinesLost",
      "LikenChannelUnreachable",
      "LikenChannelUntrusted",
      "LikenTurnHeldTooLong",
      "LikenMachineIdentityExpiring",
    ]);
    for (const r of groups.flatMap((g) => g.rules)) {
      expect(r.annotations?.summary, r.alert).toBeTruthy();
      expect(r.annotations?.description, r.alert).toMatch(/Do: .*docs\/alerts\.md#/s);
      expect(["warning", "critical"], r.alert).toContain(r.labels?.severity);
    }
  });

  it("have a query per panel, with no Grafana variable left", () => {
    const qs = dashboardQueries();
    expect(qs.length).toBeGreaterThanOrEqual(8);
    for (const q of qs) expect(q.expr, q.panel).not.toMatch(/\$|\[\[/);
  });
});

describe("expandVariables", () => {
  it.each([
    ['x{cluster=~"$cluster"}', 'x{cluster=~".+"}'],
    ['x{cluster=~"${cluster}"}', 'x{cluster=~".+"}'],
    ['x{cluster=~"[[cluster]]"}', 'x{cluster=~".+"}'],
    ["sum(rate(x[5m]))", "sum(rate(x[5m]))"],
  ])("%s -> %s", (from, to) => {
    expect(expandVariables(from)).toBe(to);
  });

  it("refuses a variable it does not know, naming it and where to define it", () => {
    expect(() => expandVariables("rate(x[$__rate_interval])")).toThrow(
      expect.objectContaining({
        code: "LIKEN_MONITORING_INVALID",
        message: expect.stringContaining(
          "$__rate_interval, which GRAFANA_ALL in src/deploy/monitoring.ts does not define",
        ),
      }),
    );
  });
});

describe("refusals", () => {
  it("a rule file without spec.groups", () => {
    expect(() => ruleGroups(file("rule.yaml", "kind: PrometheusRule\nspec: {}\n"))).toThrow(
      expect.objectContaining({
        code: "LIKEN_MONITORING_INVALID",
        message: expect.stringContaining("no spec.groups"),
      }),
    );
  });

  it("a dashboard without a query", () => {
    expect(() => dashboardQueries(file("d.json", '{"panels":[{"title":"t"}]}'))).toThrow(
      expect.objectContaining({
        code: "LIKEN_MONITORING_INVALID",
        message: expect.stringContaining("no panel has a Prometheus query"),
      }),
    );
  });

  it("reads the queries of panels inside rows", () => {
    const f = file(
      "rows.json",
      JSON.stringify({
        panels: [
          { title: "row", panels: [{ title: "inner", targets: [{ refId: "A", expr: "up" }] }] },
        ],
      }),
    );
    expect(dashboardQueries(f)).toEqual([{ panel: "inner", refId: "A", expr: "up" }]);
  });
});
