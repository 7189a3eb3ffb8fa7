// Adaptive downloads (docs/releases.md, "Adaptive downloads"; docs/adr/adaptive-downloads.md):
// the artifact's chunk index, fetched and checked against release.yaml, says which chunks the
// running slot (or the target slot, in place) already holds; those are copied, the rest are
// fetched with few single-range requests. Whatever goes wrong with the index, the local
// disks or the server's ranges, the download goes on in full from the last durable byte, and
// a log line says why.
//
// Here the plan of one artifact (what the running slot and the target in place hold) and its
// writing, with the fall back to a full download; what the running slot holds is
// ./running-seed.ts, the index ./index-fetch.ts, the writer ./seeded.ts.
import { createHash } from "node:crypto";
import { open } from "node:fs/promises";
import type { SlotWriter } from "../native/writer.js";
import type { ChunkIndex } from "../verify/chunk-index.js";
import { artifactUrl, type Artifact } from "../verify/release.js";
import { openWriter, writeArtifact, type ArtifactJob } from "./artifact.js";
import { heldOf, MIN_REUSE, seedOf } from "./running-seed.js";
import type { SeedContext } from "./seed-context.js";
import { RangeIgnored, SeedFallback } from "./seed-fallback.js";
import { ignoresRange } from "./index-fetch.js";
import type { SeedStats } from "./seed-job.js";
import { planSeeded, type LocalSource, type Plan } from "./seed-plan.js";
import { writeSeeded } from "./seeded.js";

// The download's pieces, named here as before they had modules of their own.
export { fetchIndex } from "./index-fetch.js";
export { MIN_REUSE } from "./running-seed.js";
export type { SeedContext } from "./seed-context.js";

/** Target-slot reads for the in-place check: 1 MiB windows. */
const WINDOW = 1024 * 1024;

/** Chunks from `first` on that the target slot already holds where the new artifact puts them. */
async function inPlace(
  device: string,
  a: Artifact,
  index: ChunkIndex,
  first: number,
  skip: (i: number) => boolean,
): Promise<Uint8Array> {
  const found = new Uint8Array(index.count);
  const fh = await open(device, "r");
  try {
    const buf = Buffer.allocUnsafe(WINDOW);
    for (let i = first; i < index.count;) {
      if (skip(i)) {
        i++;
        continue;
      }
      let j = i;
      while (
        j + 1 < index.count &&
        !skip(j + 1) &&
        index.offset(j + 1) + index.length(j + 1) - index.offset(i) <= WINDOW
      )
        j++;
      const len = index.offset(j) + index.length(j) - index.offset(i);
      const { bytesRead } = await fh.read(buf, 0, len, a.offset + index.offset(i));
      for (let k = i; k <= j; k++) {
        const from = index.offset(k) - index.offset(i);
        if (from + index.length(k) > bytesRead) break;
        const h = createHash("sha256")
          .update(buf.subarray(from, from + index.length(k)))
          .digest();
        if (Buffer.compare(h, index.hash(k)) === 0) found[k] = 1;
      }
      i = j + 1;
    }
  } finally {
    await fh.close();
  }
  return found;
}

/** The plan from the resume point: what the running slot and the target hold, and the rest. */
async function planFor(ctx: SeedContext, job: ArtifactJob, index: ChunkIndex): Promise<Plan> {
  const a = job.artifact;
  const start = job.resume?.offset ?? 0;
  const seed = await seedOf(ctx);
  // The chunk that holds the resume point (a resume point may fall inside a long chunk).
  let first = index.chunkAt(start);
  if (first > 0 && (first === index.count || index.offset(first) > start)) first--;
  const running = new Float64Array(index.count).fill(-1);
  for (let i = first; i < index.count; i++) {
    const prev = i > first && running[i - 1]! >= 0 ? [running[i - 1]! + index.length(i - 1)] : [];
    running[i] =
      seed.find(index.hash(i), index.length(i), [...prev, a.offset + index.offset(i)]) ?? -1;
  }
  // In place only where the target held a release (the one before the running one, as A/B
  // slots do): a fresh slot is not read through for nothing (bench:delta's "nothing" case).
  const held = (await ctx.store.release(ctx.target)) !== undefined;
  const here = held
    ? await inPlace(ctx.store.device(ctx.target), a, index, first, (i) => running[i]! >= 0)
    : new Uint8Array(index.count);
  const local = (i: number): LocalSource | undefined => {
    if (running[i]! >= 0) return { device: "running", at: running[i]! };
    return here[i] === 1 ? { device: "target", at: a.offset + index.offset(i) } : undefined;
  };
  return planSeeded({
    first,
    count: index.count,
    offset: (i) => index.offset(i),
    length: (i) => index.length(i),
    local,
  });
}

/** Goes on in full after SeedFallback: from the last durable byte, or from the start. */
async function fallBack(
  job: ArtifactJob,
  whole: ArtifactJob,
  w: SlotWriter,
  e: SeedFallback,
  stats: SeedStats,
): Promise<void> {
  const a = job.artifact;
  if (e.restart) {
    job.log?.(
      `artifact ${a.name}: adaptive download refused (${e.reason}); downloading in full from the start`,
    );
    const { resume: _resume, ...fresh } = job;
    await writeArtifact(fresh);
    stats.fetched += a.size;
    return;
  }
  const cp = await w.checkpoint();
  w.abort();
  await whole.onCheckpoint(cp);
  job.log?.(
    `artifact ${a.name}: adaptive download stopped at byte ${cp.offset}: ${e.reason}; downloading the rest in full`,
  );
  await writeArtifact({ ...whole, resume: cp });
  stats.fetched += a.size - cp.offset;
}

/** Every SAMPLE-th chunk is looked up before the full plan: 1/64 decides in 2 % of the work. */
const SAMPLE = 64;

/**
 * Whether the running slot holds enough of the artifact for the full plan to be worth making:
 * with nothing to reuse (a new image), the plain download starts at once (bench:delta's
 * "nothing" case). The target slot is not sampled (it is searched in place by the plan).
 */
async function worthLooking(ctx: SeedContext, index: ChunkIndex, start: number): Promise<boolean> {
  if ((await ctx.store.release(ctx.target)) !== undefined) return true;
  const sample: { hash: Uint8Array; length: number }[] = [];
  for (let i = index.chunkAt(start); i < index.count; i += SAMPLE)
    sample.push({ hash: index.hash(i), length: index.length(i) });
  return sample.length === 0 || (await heldOf(ctx, sample)) >= (MIN_REUSE / 2) * sample.length;
}

/** Writes the plan with the seeded writer; on SeedFallback goes on in full. */
async function writePlan(
  ctx: SeedContext,
  job: ArtifactJob,
  index: ChunkIndex,
  plan: Plan,
  stats: SeedStats,
): Promise<void> {
  const start = job.resume?.offset ?? 0;
  // Whole-stream mode: resume points carry the hash state, the digest is checked at the end.
  const { chunks: _chunks, ...bare } = job.artifact;
  const whole: ArtifactJob = { ...job, artifact: bare };
  const w = openWriter(whole, start, job.resume?.hashState);
  const devices = { running: ctx.store.device(ctx.running), target: ctx.store.device(ctx.target) };
  const frames = ctx.frames?.get(job.artifact.name);
  const pack =
    frames && job.artifact.pack
      ? {
          url: artifactUrl(ctx.base, { name: job.artifact.name, path: job.artifact.pack.path }),
          size: job.artifact.pack.size,
          frames,
        }
      : undefined;
  try {
    await writeSeeded(
      {
        job: whole,
        index,
        plan,
        devices,
        stats,
        ...(ctx.peers ? { peers: ctx.peers } : {}),
        ...(pack ? { pack } : {}),
      },
      w,
    );
  } catch (e) {
    if (!(e instanceof SeedFallback)) {
      w.abort();
      throw e;
    }
    if (e instanceof RangeIgnored) ignoresRange(ctx, e.reason);
    await fallBack(job, whole, w, e, stats);
  }
}

/**
 * Writes one artifact adaptively. `job` is the download's own job (resume point, progress);
 * returns false when nothing worth reusing was found and the caller should download in full.
 */
export async function writeAdaptive(
  ctx: SeedContext,
  job: ArtifactJob,
  index: ChunkIndex,
  stats: SeedStats,
): Promise<boolean> {
  const a = job.artifact;
  const start = job.resume?.offset ?? 0;
  // With peers, the seeded writer is the way to them even when nothing is local.
  const peers = (ctx.peers?.live().length ?? 0) > 0;
  if (!peers && !(await worthLooking(ctx, index, start))) {
    job.log?.(
      `artifact ${a.name}: a sample finds almost nothing of it locally; downloading in full`,
    );
    return false;
  }
  const plan = await planFor(ctx, job, index);
  const rest = a.size - start;
  job.log?.(
    `artifact ${a.name}: adaptive plan from ${start}: ${plan.localBytes} of ${rest} bytes local, ` +
      `${plan.remoteBytes} to fetch in ${plan.requests} range request(s)`,
  );
  if (!peers && rest > 0 && plan.localBytes < MIN_REUSE * rest) {
    job.log?.(`artifact ${a.name}: less than ${MIN_REUSE * 100} % is local; downloading in full`);
    return false;
  }
  await writePlan(ctx, job, index, plan, stats);
  return true;
}
