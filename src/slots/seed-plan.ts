// The plan of an adaptive download (pure): which chunks of the new artifact come from local
// disks and which from the channel, as segments in artifact order, the remote ones coalesced
// into few single-range requests. No I/O; table-tested in test/unit/seed-plan.test.ts.

/** Where a chunk's bytes can be read locally (checked against the index as they are read). */
export type LocalSource =
  /** The running slot holds these bytes at this device offset (anywhere in the slot). */
  | { device: "running"; at: number }
  /** The target slot already holds them in place (a previous release, an earlier attempt). */
  | { device: "target"; at: number };

export type Segment =
  /** Chunks first..last read from one device, contiguous there from `at`. */
  | { kind: "local"; device: LocalSource["device"]; first: number; last: number; at: number }
  /** Chunks first..last fetched with one Range request (some may be local: a merged gap). */
  | { kind: "remote"; first: number; last: number };

export interface PlanInput {
  /** Chunks to write, in order, from `first` to `count - 1`. */
  first: number;
  count: number;
  offset(i: number): number;
  length(i: number): number;
  local(i: number): LocalSource | undefined;
  /** Share of the remote bytes that may be added by fetching local gaps between them. */
  mergeBudget?: number;
}

/**
 * 4 %: the goal is at most 1.05 x the bytes no local disk holds; merging the smallest gaps
 * within 4 % of them keeps 1 % for the index's own bytes rounding, and cuts the requests of
 * the machine image's v1 -> v2 (ext4, 4 KiB chunks) from hundreds to tens (docs/adr).
 */
export const MERGE_BUDGET = 0.04;

export interface Plan {
  segments: Segment[];
  /** Bytes the plan reads locally and fetches (the merged gaps count as fetched). */
  localBytes: number;
  remoteBytes: number;
  requests: number;
}

function runsOf(p: PlanInput): Segment[] {
  const out: Segment[] = [];
  for (let i = p.first; i < p.count; i++) {
    const src = p.local(i);
    const prev = out[out.length - 1];
    if (src === undefined) {
      if (prev?.kind === "remote") prev.last = i;
      else out.push({ kind: "remote", first: i, last: i });
      continue;
    }
    const contiguous =
      prev?.kind === "local" &&
      prev.device === src.device &&
      prev.at + p.offset(i) - p.offset(prev.first) === src.at;
    if (contiguous) prev.last = i;
    else out.push({ kind: "local", device: src.device, first: i, last: i, at: src.at });
  }
  return out;
}

function bytesOf(p: PlanInput, s: Segment): number {
  return p.offset(s.last) + p.length(s.last) - p.offset(s.first);
}

interface Gap {
  /** Indexes into the runs: the local segments between two remote ones. */
  from: number;
  to: number;
  bytes: number;
}

/** Maximal stretches of local segments with a remote run on both sides. */
function gapsOf(p: PlanInput, runs: Segment[]): Gap[] {
  const gaps: Gap[] = [];
  for (let i = 0; i < runs.length; i++) {
    if (runs[i]!.kind !== "remote") continue;
    let j = i + 1;
    while (j < runs.length && runs[j]!.kind === "local") j++;
    if (j < runs.length && j > i + 1) {
      let bytes = 0;
      for (let k = i + 1; k < j; k++) bytes += bytesOf(p, runs[k]!);
      gaps.push({ from: i + 1, to: j - 1, bytes });
    }
    i = j - 1;
  }
  return gaps;
}

/** The runs whose gaps are fetched: smallest gaps first, while within the budget. */
function mergedRuns(gaps: Gap[], budget: number): Set<number> {
  const merged = new Set<number>();
  for (const g of [...gaps].sort((a, b) => a.bytes - b.bytes)) {
    if (g.bytes > budget) break;
    budget -= g.bytes;
    for (let k = g.from; k <= g.to; k++) merged.add(k);
  }
  return merged;
}

/**
 * Coalesces: the local gaps between two remote runs, smallest first, become part of one
 * request while the bytes they add stay within the budget.
 */
export function planSeeded(p: PlanInput): Plan {
  const runs = runsOf(p);
  const remote = runs.filter((s) => s.kind === "remote").reduce((n, s) => n + bytesOf(p, s), 0);
  const merged = mergedRuns(gapsOf(p, runs), remote * (p.mergeBudget ?? MERGE_BUDGET));
  const segments: Segment[] = [];
  runs.forEach((s, k) => {
    const prev = segments[segments.length - 1];
    const fetched = s.kind === "remote" || merged.has(k);
    // A merged gap always follows a remote run (gapsOf), so it extends that run.
    if (fetched && prev?.kind === "remote" && prev.last === s.first - 1) prev.last = s.last;
    else segments.push({ ...s });
  });
  const sum = (kind: Segment["kind"]): number =>
    segments.filter((s) => s.kind === kind).reduce((n, s) => n + bytesOf(p, s), 0);
  return {
    segments,
    localBytes: sum("local"),
    remoteBytes: sum("remote"),
    requests: segments.filter((s) => s.kind === "remote").length,
  };
}
