// The last N durations of one kind (a ring: bounded memory however long the operator runs), for
// the exit stats' percentiles. The histograms in metrics.ts are the live view; these are the
// figures bench/operator.ts reads from the stats line the operator logs at stop.

export class Samples {
  private readonly ring: Float64Array;
  private n = 0;
  /** The sum of every duration added, ms (not only the kept ones). */
  total = 0;

  constructor(size = 4096) {
    this.ring = new Float64Array(size);
  }

  add(ms: number): void {
    this.ring[this.n++ % this.ring.length] = ms;
    this.total += ms;
  }

  /** The p-th percentile (0-100) of the kept durations, 0 when none; rounded to 0.01 ms. */
  percentile(p: number): number {
    const n = Math.min(this.n, this.ring.length);
    if (n === 0) return 0;
    const sorted = this.ring.slice(0, n).sort();
    return round2(sorted[Math.max(0, Math.ceil((p / 100) * n) - 1)]!);
  }
}

export function round2(x: number): number {
  return Math.round(x * 100) / 100;
}
