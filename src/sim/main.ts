// npm run simulate -- --seeds N [--seed S] [--mutants]: wiring only (run.ts does the work).
import { parseArgs } from "node:util";
import { MUTANTS } from "./mutants.js";
import { runSeed, shrink } from "./run.js";

const { values } = parseArgs({
  options: {
    seeds: { type: "string", default: "200" },
    seed: { type: "string" },
    first: { type: "string", default: "1" },
    mutants: { type: "boolean", default: false },
    "mutant-seeds": { type: "string", default: "200" },
    /** Only this mutant (with --mutants). */
    mutant: { type: "string" },
  },
});

const t0 = performance.now();
const seeds =
  values.seed !== undefined
    ? [Number(values.seed)]
    : range(Number(values.first), Number(values.seeds));
let violations = 0;
for (const seed of seeds) {
  const r = runSeed(seed);
  if (r.violations.length === 0) continue;
  violations++;
  const v = r.violations[0]!;
  const shortest = shrink(seed, v.rule);
  console.log(`simulate: seed ${seed} broke ${v.rule} at ${v.at} ms: ${v.message}`);
  console.log(
    `  shortest schedule (${shortest.length} of ${r.faults.length} faults): ${JSON.stringify(shortest)}`,
  );
  console.log(`  replay: npm run simulate -- --seed ${seed}`);
}
let found = 0;
if (values.mutants) {
  for (const m of MUTANTS.filter((x) => values.mutant === undefined || x === values.mutant)) {
    const limit = Number(values["mutant-seeds"]);
    let took: number | undefined;
    for (let i = 1; i <= limit && took === undefined; i++) {
      // Found: the mutant breaks a seed whose unbroken run is clean (a finding of the unbroken
      // code, reported above, must not count for a mutant).
      if (runSeed(i, m).violations.length > 0 && runSeed(i).violations.length === 0) took = i;
    }
    if (took !== undefined) found++;
    console.log(
      `simulate: mutant ${m}: ${took === undefined ? `not found in ${limit} seeds` : `found at seed ${took} (${took} seeds)`}`,
    );
  }
}
const secs = ((performance.now() - t0) / 1000).toFixed(1);
console.log(
  `simulate: seeds=${seeds.length} violations=${violations} rules-broken-found=${found}/${MUTANTS.length} ${secs}s`,
);
process.exitCode = violations > 0 ? 1 : 0;

function range(first: number, n: number): number[] {
  return Array.from({ length: n }, (_, i) => first + i);
}
