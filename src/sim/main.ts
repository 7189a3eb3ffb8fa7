// npm run simulate -- --seeds N [--seed S [--trace MACHINE]] [--mutants]: wiring only (run.ts
// does the work, trace.ts prints one machine's history).
import { parseArgs } from "node:util";
import { MUTANTS } from "./mutants.js";
import { runSeeds } from "./pool.js";
import { findMutant, shapeOf, shrink } from "./run.js";
import { traceOf } from "./trace.js";
import { runWorld } from "./world.js";

const { values } = parseArgs({
  options: {
    seeds: { type: "string", default: "200" },
    seed: { type: "string" },
    first: { type: "string", default: "1" },
    mutants: { type: "boolean", default: false },
    "mutant-seeds": { type: "string", default: "200" },
    /** Only this mutant (with --mutants). */
    mutant: { type: "string" },
    /** With --seed: print this machine's history (repeat for more machines). */
    trace: { type: "string", multiple: true },
    /** Worker threads to run the seeds on (1: this thread). */
    workers: { type: "string", default: "1" },
  },
});

if (values.trace !== undefined && values.seed !== undefined) {
  const seed = Number(values.seed);
  const { shape, faults } = shapeOf(seed);
  const { history } = runWorld(seed, shape, faults, undefined);
  for (const m of values.trace)
    console.log([`trace ${m} (seed ${seed}):`, ...traceOf(history, m)].join("\n"));
}

const t0 = performance.now();
const seeds =
  values.seed !== undefined
    ? [Number(values.seed)]
    : range(Number(values.first), Number(values.seeds));
let violations = 0;
for (const r of await runSeeds(seeds, Number(values.workers))) {
  if (r.violations.length === 0) continue;
  violations++;
  const seed = r.seed;
  const v = r.violations[0]!;
  const shortest = shrink(seed, v.rule);
  console.log(`simulate: seed ${seed} broke ${v.rule} at ${v.at} ms: ${v.message}`);
  console.log(
    `  shortest schedule (${shortest.length} of ${r.faults} faults): ${JSON.stringify(shortest)}`,
  );
  const trace = v.machine === undefined ? "" : ` --trace ${v.machine}`;
  console.log(`  replay: npm run simulate -- --seed ${seed}${trace}`);
}
let found = 0;
if (values.mutants) {
  const limit = Number(values["mutant-seeds"]);
  for (const m of MUTANTS.filter((x) => values.mutant === undefined || x === values.mutant)) {
    const hit = findMutant(m, limit);
    if (hit !== undefined) found++;
    console.log(
      hit === undefined
        ? `simulate: mutant ${m}: not found in ${limit} seeds`
        : `simulate: mutant ${m}: found at seed ${hit.seed} (${hit.seed} seeds): ${hit.rule}: ${hit.message}`,
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
