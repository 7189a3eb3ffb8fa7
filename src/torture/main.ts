// npm run torture -- --runs N --seed S [--machines M] [--duration D] [--cert-seconds C]:
// wiring only (run.ts).
import { parseArgs } from "node:util";
import { errorText } from "../errors.js";
import { parseTortureArgs } from "./args.js";
import { runTorture, violationReport } from "./run.js";
import { FAULT_KINDS } from "./schedule.js";

const say = (l: string): void => void process.stdout.write(`${l}\n`);

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      runs: { type: "string", default: "1" },
      seed: { type: "string", default: "1" },
      machines: { type: "string", default: "5" },
      duration: { type: "string", default: "90" },
      "cert-seconds": { type: "string" },
    },
  });
  const a = parseTortureArgs(values);
  const t0 = performance.now();
  let violations = 0;
  let converged = 0;
  const kinds = new Set<string>();
  for (let i = 0; i < a.runs; i++) {
    const seed = a.seed + i;
    say(
      `torture: seed ${seed}: starting (${a.machines} machines, ${a.durationMs / 1000} s of faults)`,
    );
    const r = await runTorture({
      seed,
      machines: a.machines,
      durationMs: a.durationMs,
      log: say,
      ...(a.certSeconds === undefined ? {} : { certSeconds: a.certSeconds }),
    });
    violations += r.violations.length;
    for (const f of r.shape.faults) kinds.add(f.kind);
    if (r.unconverged.length === 0) converged++;
    for (const v of r.violations) violationReport(r, v).forEach(say);
    say(
      `torture: seed ${seed}: faults=${r.shape.faults.length} budget=${r.shape.maxUnavailable} violations=${r.violations.length} ${
        r.unconverged.length === 0 ? "converged" : `not converged (${r.unconverged.join(", ")})`
      } ${(r.ms / 1000).toFixed(1)}s; replay: npm run torture -- --seed ${seed} --machines ${a.machines} --duration ${a.durationMs / 1000}${a.certSeconds === undefined ? "" : ` --cert-seconds ${a.certSeconds}`}`,
    );
  }
  const secs = ((performance.now() - t0) / 1000).toFixed(1);
  // The last line: what was drawn (the kinds, in the schedule's order) and what broke.
  const drawn = FAULT_KINDS.filter((k) => kinds.has(k)).join(",") || "none";
  say(
    `torture: runs=${a.runs} violations=${violations} converged=${converged}/${a.runs} kinds=${drawn} ${secs}s`,
  );
  return violations > 0 || converged < a.runs ? 1 : 0;
}

main().then(
  (code) => (process.exitCode = code),
  (e: unknown) => {
    process.stderr.write(`torture: ${errorText(e)}\n`);
    process.exitCode = 2;
  },
);
