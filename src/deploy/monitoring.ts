// liken's alerts and dashboard (config/monitoring) as data: the rule groups of the shipped
// PrometheusRule (a plain Prometheus rules file once written out), and every query the
// dashboard's panels run, with Grafana's template variables replaced by what "All" selects.
// The tests that prove them against promtool and a real Prometheus read them from here.
import { readFileSync } from "node:fs";
import path from "node:path";
import { parse, stringify } from "yaml";
import { LikenError } from "../errors.js";
import { CONFIG_DIR } from "./chart.js";

export const MONITORING_DIR = path.join(CONFIG_DIR, "monitoring");
export const RULE_FILE = path.join(MONITORING_DIR, "prometheus-rule.yaml");
export const DASHBOARD_FILE = path.join(MONITORING_DIR, "dashboard.json");

export interface AlertRule {
  alert: string;
  expr: string;
  for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

export interface RuleGroup {
  name: string;
  interval?: string;
  rules: AlertRule[];
}

/**
 * What the dashboard's template variables stand for when a person picks "All": the cluster
 * variable's allValue (a regex matching every cluster). A query that uses a variable not
 * listed here is refused, so a new variable cannot slip past the tests unread.
 */
export const GRAFANA_ALL: Readonly<Record<string, string>> = { cluster: ".+" };

function monitoringError(what: string, file: string): LikenError {
  return new LikenError(
    "LIKEN_MONITORING_INVALID",
    `${path.relative(path.dirname(CONFIG_DIR), file)}: ${what}; fix the file (docs/alerts.md describes its parts)`,
    { context: { file } },
  );
}

/** The rule groups of config/monitoring/prometheus-rule.yaml (the PrometheusRule's spec). */
export function ruleGroups(file = RULE_FILE): RuleGroup[] {
  const doc = parse(readFileSync(file, "utf8")) as { spec?: { groups?: RuleGroup[] } } | null;
  const groups = doc?.spec?.groups;
  if (!Array.isArray(groups) || groups.length === 0)
    throw monitoringError("no spec.groups: not a PrometheusRule with rules", file);
  return groups;
}

/** The groups as a Prometheus rules file (what promtool and a plain Prometheus read). */
export function rulesFile(groups: RuleGroup[]): string {
  return stringify({ groups });
}

/** The alert names, in the order the rule file declares them. */
export function alertNames(groups: RuleGroup[]): string[] {
  return groups.flatMap((g) => g.rules.map((r) => r.alert));
}

export interface PanelQuery {
  panel: string;
  refId: string;
  /** The query as Prometheus receives it once every variable reads "All". */
  expr: string;
}

interface Panel {
  title?: string;
  targets?: { refId?: string; expr?: string }[];
  panels?: Panel[];
}

/** Replaces `$name`, `${name}` and `[[name]]` by GRAFANA_ALL's value; refuses an unknown one. */
export function expandVariables(expr: string, file = DASHBOARD_FILE): string {
  return expr.replace(/\$\{(\w+)\}|\$(\w+)|\[\[(\w+)\]\]/g, (whole, a, b, c) => {
    const name = (a ?? b ?? c) as string;
    const value = GRAFANA_ALL[name];
    if (value === undefined)
      throw monitoringError(
        `query uses the variable ${whole}, which GRAFANA_ALL in src/deploy/monitoring.ts does not define`,
        file,
      );
    return value;
  });
}

/** Every query of every panel (rows' panels included), variables expanded. */
export function dashboardQueries(file = DASHBOARD_FILE): PanelQuery[] {
  const dash = JSON.parse(readFileSync(file, "utf8")) as { panels?: Panel[] };
  const out: PanelQuery[] = [];
  const walk = (panels: Panel[]): void => {
    for (const p of panels) {
      for (const t of p.targets ?? []) {
        if (t.expr === undefined) continue;
        out.push({
          panel: p.title ?? "(untitled)",
          refId: t.refId ?? "?",
          expr: expandVariables(t.expr, file),
        });
      }
      walk(p.panels ?? []);
    }
  };
  walk(dash.panels ?? []);
  if (out.length === 0) throw monitoringError("no panel has a Prometheus query", file);
  return out;
}
