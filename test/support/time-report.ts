// The end of .ci/run: each tier's time against its budget (test/budgets.json), the ten slowest
// files, and whether the caches were warm. A tier over its budget is a warning that names the
// files that grew; it never fails the run (.ci/run keeps `npm test`'s exit code).
//
//   tsx test/support/time-report.ts --times DIR --budgets test/budgets.json \
//     --cache-before FILE --cache ROOT [--setup S] [--total S]
//
// and, to record this run's file times as the new references: --write-references.
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { parseArgs } from "node:util";
import type { FileTime, RunTimes } from "./time-reporter.js";

export interface Budgets {
  /** Seconds each tier may take (a tier: a vitest project, or several with one prefix). */
  tiers: Record<string, number>;
  /** Seconds each file took when the references were last written (to name what grew). */
  files: Record<string, number>;
}

/** integration-operator is the integration tier's one-at-a-time half (vitest.config.ts). */
export function tierOf(project: string): string {
  return project.split("-")[0] ?? project;
}

export interface TierTime {
  tier: string;
  seconds: number;
  files: FileTime[];
}

/** One row per tier, in the order the runs ran; a tier run twice adds up. */
export function tiers(runs: readonly RunTimes[]): TierTime[] {
  const byTier = new Map<string, TierTime>();
  for (const run of [...runs].sort((a, b) => a.startedAt - b.startedAt)) {
    const tier = [...new Set(run.projects.map(tierOf))].join("+") || "none";
    const t = byTier.get(tier) ?? { tier, seconds: 0, files: [] };
    t.seconds += run.seconds;
    t.files.push(...run.files);
    byTier.set(tier, t);
  }
  return [...byTier.values()];
}

/** A file grew when it took a quarter and 5 s more than its reference, or has none. */
export function grew(f: FileTime, reference: number | undefined): boolean {
  if (reference === undefined) return true;
  return f.seconds > reference * 1.25 && f.seconds - reference >= 5;
}

/** The warnings: each tier over its budget, with the files that grew, slowest first. */
export function budgetWarnings(ts: readonly TierTime[], b: Budgets): string[] {
  const out: string[] = [];
  for (const t of ts) {
    const budget = b.tiers[t.tier];
    if (budget === undefined) {
      out.push(`tier ${t.tier} has no budget in test/budgets.json (took ${fmt(t.seconds)} s)`);
      continue;
    }
    if (t.seconds <= budget) continue;
    const grown = t.files
      .filter((f) => grew(f, b.files[f.file]))
      .sort((x, y) => y.seconds - x.seconds)
      .map((f) => {
        const ref = b.files[f.file];
        return `    ${f.file}: ${fmt(f.seconds)} s (${ref === undefined ? "new, no reference" : `was ${fmt(ref)} s`})`;
      });
    out.push(
      `tier ${t.tier} took ${fmt(t.seconds)} s, over its budget of ${fmt(budget)} s; ` +
        (grown.length === 0
          ? "no file grew past its reference: the machine was slower, or many files grew a little"
          : `the files that grew:\n${grown.join("\n")}`),
    );
  }
  return out;
}

export function slowest(ts: readonly TierTime[], n = 10): FileTime[] {
  return ts
    .flatMap((t) => t.files)
    .sort((a, b) => b.seconds - a.seconds)
    .slice(0, n);
}

/** The cache's entries (up to three levels: a tool and its version, an image stage). */
export function cacheEntries(root: string, depth = 3): string[] {
  const out: string[] = [];
  const walk = (dir: string, rel: string, left: number): void => {
    if (left === 0 || !existsSync(dir)) return;
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      // Work in progress and running control planes are not a cache.
      if (!e.isDirectory() || e.name.includes(".tmp-") || e.name === "clusters") continue;
      const r = rel === "" ? e.name : `${rel}/${e.name}`;
      out.push(r);
      walk(path.join(dir, e.name), r, left - 1);
    }
  };
  walk(root, "", depth);
  return out.sort();
}

/** New top entries: a tool's version directory, not every directory inside it. */
export function builtRoots(before: readonly string[], after: readonly string[]): string[] {
  const had = new Set(before);
  const fresh = after.filter((e) => !had.has(e));
  return fresh.filter((e) => !fresh.some((o) => e.startsWith(`${o}/`)));
}

const fmt = (s: number): string => s.toFixed(0);

function table(rows: string[][]): string {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  return rows
    .map((r) =>
      r.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join("  "),
    )
    .join("\n");
}

export function report(o: {
  runs: RunTimes[];
  budgets: Budgets;
  cacheBuilt: string[] | undefined;
  setupSeconds?: number;
  totalSeconds?: number;
}): string {
  const ts = tiers(o.runs);
  const rows = [["tier", "seconds", "budget", "files"]];
  if (o.setupSeconds !== undefined) rows.push(["setup (apt, npm ci)", fmt(o.setupSeconds), "", ""]);
  for (const t of ts) {
    const b = o.budgets.tiers[t.tier];
    rows.push([
      t.tier,
      fmt(t.seconds),
      b === undefined ? "-" : `${fmt(b)}${t.seconds > b ? " OVER" : ""}`,
      String(t.files.length),
    ]);
  }
  const inTiers = ts.reduce((s, t) => s + t.seconds, 0) + (o.setupSeconds ?? 0);
  if (o.totalSeconds !== undefined) {
    rows.push(["typecheck, lint, npm", fmt(Math.max(0, o.totalSeconds - inTiers)), "", ""]);
    rows.push(["total", fmt(o.totalSeconds), "", ""]);
  }
  const lines = ["", "ci: time by tier", table(rows), "", "ci: the ten slowest files"];
  lines.push(
    table([
      ["file", "seconds", "tier"],
      ...slowest(ts).map((f) => [f.file, fmt(f.seconds), tierOf(f.project)]),
    ]),
  );
  lines.push("");
  if (o.cacheBuilt === undefined) lines.push("ci: caches: not compared (no snapshot from before)");
  else if (o.cacheBuilt.length === 0) lines.push("ci: caches: warm (this run built nothing)");
  else lines.push(`ci: caches: cold, this run built: ${o.cacheBuilt.join(", ")}`);
  const warnings = budgetWarnings(ts, o.budgets);
  for (const w of warnings) lines.push(`ci: WARNING: ${w}`);
  if (warnings.length === 0) lines.push("ci: every tier within its budget (test/budgets.json)");
  return lines.join("\n");
}

export function readRuns(dir: string): RunTimes[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .filter((f) => f.endsWith(".json"))
    .map((f) => JSON.parse(readFileSync(path.join(dir, f), "utf8")) as RunTimes);
}

function main(): void {
  const { values } = parseArgs({
    options: {
      times: { type: "string" },
      budgets: { type: "string", default: "test/budgets.json" },
      "cache-before": { type: "string" },
      cache: { type: "string" },
      setup: { type: "string" },
      total: { type: "string" },
      "write-references": { type: "boolean", default: false },
    },
  });
  if (values.times === undefined)
    throw new Error("time-report: give --times DIR (LIKEN_TIME_DIR of the run)");
  const runs = readRuns(values.times);
  const budgets = JSON.parse(readFileSync(values.budgets, "utf8")) as Budgets;
  let cacheBuilt: string[] | undefined;
  if (
    values["cache-before"] !== undefined &&
    values.cache !== undefined &&
    existsSync(values["cache-before"])
  ) {
    const before = readFileSync(values["cache-before"], "utf8").split("\n").filter(Boolean);
    cacheBuilt = builtRoots(before, cacheEntries(values.cache));
  }
  process.stdout.write(
    `${report({
      runs,
      budgets,
      cacheBuilt,
      setupSeconds: values.setup === undefined ? undefined : Number(values.setup),
      totalSeconds: values.total === undefined ? undefined : Number(values.total),
    })}\n`,
  );
  if (values["write-references"]) {
    const files = { ...budgets.files };
    for (const t of tiers(runs)) for (const f of t.files) files[f.file] = f.seconds;
    const sorted = Object.fromEntries(Object.entries(files).sort(([a], [b]) => a.localeCompare(b)));
    writeFileSync(values.budgets, `${JSON.stringify({ ...budgets, files: sorted }, null, 2)}\n`);
    process.stdout.write(
      `ci: the file references in ${values.budgets} now hold this run's times\n`,
    );
  }
}

if (process.argv[1] !== undefined && import.meta.url.endsWith(path.basename(process.argv[1]))) {
  main();
}
