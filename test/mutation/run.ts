// `npm run test:mutation [-- module ...]`: StrykerJS over the pure decision modules, one
// module at a time, against the unit tests only. Each module keeps its own incremental file
// under reports/mutation/, so a second run re-tests only the mutants whose code or tests
// changed (for mutants of module-level constants it can reuse a stale "survived": delete the
// module's file before recording its score, docs/testing.md). Prints each module's score and its surviving mutants, then one table; exits 1 when
// a module scores under the goal (docs/testing.md lists the survivors known to be equivalent).
//
//   LIKEN_MUTATION_CONCURRENCY  test runners at once (default 1: the machine is shared)
//   LIKEN_MUTATION_TYPECHECK=0  skip the TypeScript checker: mutants that do not compile are
//                               then run (and mostly killed) instead of set aside; several
//                               times faster on a busy 2-core machine, a slightly different score
import path from "node:path";
import { Stryker } from "@stryker-mutator/core";

type PartialStrykerOptions = ConstructorParameters<typeof Stryker>[0];
type MutantResult = Awaited<ReturnType<Stryker["runMutationTest"]>>[number];
type LogLevel = NonNullable<PartialStrykerOptions["logLevel"]>;

/** The modules mutated: pure functions from what is observed to what to do. */
export const MODULES = [
  "src/operator/decide/decide.ts",
  "src/operator/decide/settle.ts",
  "src/operator/decide/grant.ts",
  "src/operator/turns/budget.ts",
  "src/operator/turns/taken-back.ts",
  "src/operator/view/machine-view.ts",
  "src/agent/steps.ts",
  "src/agent/towards.ts",
  "src/agent/trial-boot.ts",
  "src/agent/trial-armed.ts",
  "src/agent/give-back.ts",
  "src/agent/step-verdicts.ts",
  "src/drain/plan.ts",
  "src/verify/release.ts",
  "src/verify/document.ts",
  // The slot check proper (src/slots/check.ts) reads devices; its rules, the marker's
  // transitions and the stage plan, are here.
  "src/slots/marker.ts",
] as const;

/** The goal per module (issue 18): at least this share of mutants killed. */
export const GOAL_PERCENT = 90;

const REPO = path.resolve(import.meta.dirname, "../..");
const REPORTS = path.join(REPO, "reports", "mutation");

export interface Score {
  module: string;
  killed: number;
  survived: number;
  noCoverage: number;
  timeout: number;
  invalid: number;
  percent: number;
  survivors: MutantResult[];
}

export function scoreOf(module: string, results: readonly MutantResult[]): Score {
  const count = (...s: MutantResult["status"][]) =>
    results.filter((r) => s.includes(r.status)).length;
  const killed = count("Killed");
  const timeout = count("Timeout");
  const survived = count("Survived");
  const noCoverage = count("NoCoverage");
  const detected = killed + timeout;
  const valid = detected + survived + noCoverage;
  return {
    module,
    killed,
    survived,
    noCoverage,
    timeout,
    invalid: count("CompileError", "RuntimeError"),
    // Stryker's own mutation score: detected over every valid mutant.
    percent: valid === 0 ? 100 : (100 * detected) / valid,
    survivors: results.filter((r) => r.status === "Survived" || r.status === "NoCoverage"),
  };
}

function options(module: string, concurrency: number, typecheck: boolean): PartialStrykerOptions {
  const slug = path.basename(module, ".ts");
  const dir = path.basename(path.dirname(module));
  return {
    mutate: [module],
    testRunner: "vitest",
    vitest: { configFile: "test/mutation/vitest.config.ts" },
    checkers: typecheck ? ["typescript"] : [],
    // The checker type-checks this smaller program (src and the unit tests) for every mutant.
    tsconfigFile: "test/mutation/tsconfig.json",
    coverageAnalysis: "perTest",
    concurrency,
    incremental: true,
    incrementalFile: path.join(REPORTS, `${dir}-${slug}.incremental.json`),
    reporters: ["clear-text", "html", "progress-append-only"],
    htmlReporter: { fileName: path.join(REPORTS, `${dir}-${slug}.html`) },
    clearTextReporter: { reportTests: false, reportMutants: true, reportScoreTable: true },
    tempDirName: ".stryker-tmp",
    ignorePatterns: ["reports", ".lab", "out", "coverage", "dist"],
    // A slow test under load is not a mutant that loops: give each run room.
    timeoutMS: 20_000,
    timeoutFactor: 2,
    logLevel: "warn" as LogLevel,
  };
}

function where(r: MutantResult): string {
  const at = r.location.start;
  return `${r.fileName}:${at.line}:${at.column + 1}`;
}

async function main(): Promise<void> {
  const wanted = process.argv.slice(2);
  const modules = MODULES.filter((m) => wanted.length === 0 || wanted.some((w) => m.includes(w)));
  if (modules.length === 0) {
    console.error(
      `no module matches ${wanted.join(", ")}; the modules are:\n  ${MODULES.join("\n  ")}`,
    );
    process.exit(2);
  }
  const concurrency = Number(process.env.LIKEN_MUTATION_CONCURRENCY ?? "1");
  const typecheck = process.env.LIKEN_MUTATION_TYPECHECK !== "0";
  const scores: Score[] = [];
  for (const module of modules) {
    const started = Date.now();
    console.log(
      `\n=== ${module}: mutating (concurrency ${concurrency}, type check ${typecheck ? "on" : "off"}) ===`,
    );
    const results = await new Stryker(options(module, concurrency, typecheck)).runMutationTest();
    const score = scoreOf(module, results);
    scores.push(score);
    const secs = Math.round((Date.now() - started) / 1000);
    console.log(`${module}: ${score.percent.toFixed(2)}% killed, ${secs} s`);
    for (const s of score.survivors) {
      console.log(
        `  ${s.status.padEnd(10)} ${where(s)} ${s.mutatorName}: ${JSON.stringify(s.replacement ?? "")}`,
      );
    }
  }
  console.log("\nmodule                          score   killed survived no-cover timeout invalid");
  for (const s of scores) {
    console.log(
      `${s.module.padEnd(31)} ${s.percent.toFixed(2).padStart(6)}% ${String(s.killed).padStart(7)} ${String(s.survived).padStart(8)} ${String(s.noCoverage).padStart(8)} ${String(s.timeout).padStart(7)} ${String(s.invalid).padStart(7)}`,
    );
  }
  const below = scores.filter((s) => s.percent < GOAL_PERCENT);
  if (below.length > 0) {
    console.log(
      `\nunder the goal of ${GOAL_PERCENT}%: ${below.map((s) => s.module).join(", ")}; kill the survivors with a test, or list each in docs/testing.md with why it is equivalent`,
    );
    process.exitCode = 1;
  }
}

await main();
