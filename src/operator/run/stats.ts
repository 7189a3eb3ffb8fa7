// What the operator did, for the line it logs at stop and for bench/operator.ts: counters its
// parts bump as they act (reconciles, writes, grants, Events...), and figures made from samples
// (the heap, the percentiles of decide()'s time and of a pass's). The live view is metrics.ts
// (Prometheus); these are the totals of one run, cheap enough to keep on every path.
import { getHeapStatistics } from "node:v8";
import { Samples, round2 } from "./samples.js";

/** What the operator did, for logs at exit and the benchmark. */
export interface OperatorStats {
  reconciles: number;
  clusterWrites: number;
  machineWrites: number;
  conflicts: number;
  reads: number;
  events: number;
  grants: number;
  releases: number;
  stalls: number;
  wakeUps: number;
  /** Status writes the API server refused as Invalid (422). */
  refusals: number;
  /** The V8 heap in use, MiB: its peak as sampled every tick, and at stop. */
  heapPeakMiB: number;
  heapMiB: number;
  /** decide()'s time, ms: the 99th percentile of the last 4,096 decisions, and in all (at stop). */
  decideP99Ms: number;
  decideMs: number;
  /** The most Lost marks in flight at once (at most MAX_MARKS_IN_FLIGHT, lost-marks.ts). */
  marksInFlightPeak: number;
  /**
   * Where a grant's time goes inside this copy (passes.ts), p99 over the last passes, ms: how
   * long a Cluster's first event waited for its pass, how long a pass took (decide and the
   * status write), and the status write's round trip alone (the API server's share).
   */
  passWaitP99Ms: number;
  /**
   * decide()'s CPU (this process's, process.cpuUsage around it), p99, ms: its own cost, which a
   * loaded machine's wait for a core (in decideP99Ms, wall time) does not move.
   */
  decideCpuP99Ms: number;
  passP99Ms: number;
  statusWriteP99Ms: number;
}

/** Every figure at zero: a copy that has done nothing yet. */
export function newStats(): OperatorStats {
  return {
    reconciles: 0,
    clusterWrites: 0,
    machineWrites: 0,
    conflicts: 0,
    reads: 0,
    events: 0,
    grants: 0,
    releases: 0,
    stalls: 0,
    wakeUps: 0,
    refusals: 0,
    heapPeakMiB: 0,
    heapMiB: 0,
    decideP99Ms: 0,
    decideMs: 0,
    marksInFlightPeak: 0,
    passWaitP99Ms: 0,
    decideCpuP99Ms: 0,
    passP99Ms: 0,
    statusWriteP99Ms: 0,
  };
}

/** The last durations behind the stats' percentiles (samples.ts). */
export class Timings {
  readonly decide = new Samples();
  readonly decideCpu = new Samples();
  readonly passWait = new Samples();
  readonly pass = new Samples();
  readonly statusWrite = new Samples();
}

/** The heap figures of the stats (getHeapStatistics: cheap, unlike memoryUsage's RSS read). */
export function sampleHeap(stats: OperatorStats): void {
  const mib = getHeapStatistics().used_heap_size / 2 ** 20;
  stats.heapMiB = Math.round(mib);
  stats.heapPeakMiB = Math.max(stats.heapPeakMiB, stats.heapMiB);
}

/** The stats' percentiles, over the last samples of each (at stop: a sort each). */
export function percentiles(stats: OperatorStats, t: Timings): void {
  stats.decideP99Ms = t.decide.percentile(99);
  stats.decideMs = round2(t.decide.total);
  stats.decideCpuP99Ms = t.decideCpu.percentile(99);
  stats.passWaitP99Ms = t.passWait.percentile(99);
  stats.passP99Ms = t.pass.percentile(99);
  stats.statusWriteP99Ms = t.statusWrite.percentile(99);
}
