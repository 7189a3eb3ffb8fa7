// Seeds run across worker threads (`--workers N`): each seed is independent and whole (its
// shape, faults and API server faults all come from it), so which thread runs it changes
// nothing in its result. The caller gets the results in seed order, whatever the threads'
// timing; a violation is shrunk and printed by the caller, as for one thread.
import { Worker } from "node:worker_threads";
import type { Violation } from "../invariants/index.js";
import { runSeed } from "./run.js";

export interface SeedOutcome {
  seed: number;
  violations: Violation[];
  faults: number;
}

function outcomeOf(seed: number): SeedOutcome {
  const r = runSeed(seed);
  return { seed, violations: r.violations, faults: r.faults.length };
}

/** Each seed's outcome, in the order given; `workers` ≤ 1 runs them on this thread. */
export async function runSeeds(seeds: readonly number[], workers: number): Promise<SeedOutcome[]> {
  if (workers <= 1 || seeds.length < 2) return seeds.map(outcomeOf);
  // Seeds dealt round-robin: small and large fleets spread alike over the threads.
  const parts = Array.from({ length: Math.min(workers, seeds.length) }, (_, w) =>
    seeds.filter((_, i) => i % workers === w),
  );
  const done = await Promise.all(parts.map(runInWorker));
  const bySeed = new Map(done.flat().map((o) => [o.seed, o] as const));
  return seeds.map((s) => bySeed.get(s)!);
}

function runInWorker(seeds: number[]): Promise<SeedOutcome[]> {
  return new Promise((resolve, reject) => {
    // The thread runs this same module's TypeScript through tsx's loader, as the main thread
    // does (a worker does not inherit the loader hooks, and takes no --import of its own).
    const boot =
      `import(${JSON.stringify(import.meta.resolve("tsx/esm/api"))})` +
      `.then((t) => { t.register(); return import(${JSON.stringify(import.meta.url)}); })`;
    const w = new Worker(boot, { eval: true, workerData: seeds });
    w.once("message", (m: SeedOutcome[]) => resolve(m));
    w.once("error", reject);
    w.once("exit", (code) => {
      if (code !== 0) reject(new Error(`a simulation worker exited with code ${code}`));
    });
  });
}

// In a worker: run the seeds handed over, send the outcomes back.
const { isMainThread, parentPort, workerData } = await import("node:worker_threads");
if (!isMainThread && parentPort !== null && Array.isArray(workerData)) {
  parentPort.postMessage((workerData as number[]).map(outcomeOf));
}
