// Adaptive downloads (docs/releases.md, "Adaptive downloads"; docs/adr/adaptive-downloads.md):
// the artifact's chunk index, fetched and checked against release.yaml, says which chunks the
// running slot (or the target slot, in place) already holds; those are copied, the rest are
// fetched with few single-range requests. Whatever goes wrong with the index, the local
// disks or the server's ranges, the download goes on in full from the last durable byte, and
// a log line says why.
import { createHash } from "node:crypto";
import { open } from "node:fs/promises";
import { deviceInfo } from "../native/index.js";
import type { SlotWriter } from "../native/writer.js";
import { ChunkIndex, INDEX_CHUNK, INDEX_HEADER, IndexWriter } from "../verify/chunk-index.js";
import { digestOf } from "../verify/digest.js";
import { fetchDocument } from "../verify/fetch.js";
import { artifactUrl, parseRelease, type Artifact, type Release } from "../verify/release.js";
import type { FrameTable } from "../verify/index-pages.js";
import { zstd } from "../verify/zstd.js";
import { fetchPaged } from "./paged-index.js";
import { openWriter, writeArtifact, type ArtifactJob } from "./artifact.js";
import type { SlotName } from "./config.js";
import { planSeeded, type LocalSource, type Plan } from "./seed-plan.js";
import { countHeld, hashRegion, SeedMap } from "./seed-map.js";
import type { PeerSet } from "./peer-sources.js";
import {
  PEER_IDLE_TIMEOUT_MS,
  peerFault,
  SeedFallback,
  writeSeeded,
  type SeedStats,
} from "./seeded.js";
import type { SlotStore } from "./store.js";

/**
 * Below 2 % of the artifact found locally, the plain download is used: it writes through the
 * release's large chunks with no per-4 KiB hashing in JavaScript, so an artifact with nothing
 * to reuse is never slower than before (bench:delta's "large change" row).
 */
export const MIN_REUSE = 0.02;

/** Target-slot reads for the in-place check: 1 MiB windows. */
const WINDOW = 1024 * 1024;

/** A kept index of the running slot and where its artifact starts on the device. */
interface Kept {
  index: ChunkIndex;
  offset: number;
}

export interface SeedContext {
  store: SlotStore;
  running: SlotName;
  target: SlotName;
  release: Release;
  base: URL;
  log?: (m: string) => void;
  /** Built on first use, shared by the release's artifacts. */
  seed?: SeedMap;
  /** Peers that hold the release (docs/peers.md): remote ranges go to them first. */
  peers?: PeerSet;
  /** Each packed artifact's frames (./paged-index.ts), by artifact name: its chunks come
   * compressed from the pack. */
  frames?: Map<string, FrameTable>;
  /** The running release's kept indexes, read once (see runningKept). */
  kept?: Promise<Kept[] | undefined>;
}

async function keptIndex(
  ctx: SeedContext,
  slot: SlotName,
  a: Artifact,
): Promise<ChunkIndex | undefined> {
  if (a.index === undefined) return undefined;
  const bytes = await ctx.store.keptIndex(slot, a.name);
  if (bytes === undefined || digestOf(bytes) !== a.index.digest) return undefined;
  try {
    return ChunkIndex.parse(bytes, a.size, `kept index of ${a.name}`);
  } catch {
    return undefined;
  }
}

/** The kept index of a running slot whose release is not recorded (installed by other means). */
const DEVICE_INDEX = "device";

/**
 * The running slot without a recorded release: the index of its first `span` bytes, kept from
 * an earlier download (the slot runs, so nothing of liken writes it; withdrawing a slot drops
 * its indexes), else hashed now and kept.
 */
async function deviceSeed(ctx: SeedContext, map: SeedMap, span: number): Promise<string> {
  const device = ctx.store.device(ctx.running);
  const end = Math.min(span, deviceInfo(device).size);
  const kept = await ctx.store.keptIndex(ctx.running, DEVICE_INDEX);
  if (kept !== undefined && kept.length >= INDEX_HEADER) {
    try {
      const idx = ChunkIndex.parse(kept, Number(kept.readBigUInt64BE(8)), "kept device index");
      if (idx.size >= end - (end % INDEX_CHUNK)) {
        map.addIndex(idx, 0);
        return "no release recorded: the device's index kept from an earlier download";
      }
    } catch {
      // A torn or foreign file: hashed again below.
    }
  }
  const index = new IndexWriter();
  await hashRegion(device, 0, end, map, index);
  await ctx.store.keepIndex(ctx.running, DEVICE_INDEX, index.finish());
  return "no release recorded: hashed from the device, index kept";
}

/**
 * The running release's kept indexes, one per artifact, when it left one for each (else
 * undefined: the slot must be hashed, which only the full map does). Read once, and begun
 * before the index pages are fetched, so that the disk and the network overlap.
 */
function runningKept(ctx: SeedContext): Promise<Kept[] | undefined> {
  // A read that fails answers undefined here; the map's build then meets the fault and says it.
  ctx.kept ??= readKept(ctx).catch(() => undefined);
  return ctx.kept;
}

async function readKept(ctx: SeedContext): Promise<Kept[] | undefined> {
  const doc = await ctx.store.release(ctx.running);
  if (doc === undefined) return undefined;
  let running: Release;
  try {
    running = parseRelease(doc);
  } catch {
    return undefined;
  }
  const out: Kept[] = [];
  for (const a of running.artifacts) {
    const index = await keptIndex(ctx, ctx.running, a);
    if (index === undefined) return undefined;
    out.push({ index, offset: a.offset });
  }
  return out;
}

/**
 * How many of a sample's chunks the running slot holds. Before the map is built, one pass over
 * the running release's kept indexes answers (./seed-map.ts, countHeld): when nothing is
 * reused (a new image), the download goes on in full without the map's build and sort ever
 * taking the core (bench:delta's "nothing" case). A slot that left no index is hashed into
 * the map, which the plan then uses.
 */
async function heldOf(
  ctx: SeedContext,
  chunks: readonly { hash: Uint8Array; length: number }[],
): Promise<number> {
  if (ctx.seed === undefined) {
    const t = Date.now();
    const kept = await runningKept(ctx);
    if (kept !== undefined) {
      const n = countHeld(
        chunks,
        kept.map((k) => k.index),
      );
      ctx.log?.(
        `adaptive: ${n} of a sample of ${chunks.length} chunks in the running slot ${ctx.running}'s kept indexes (${Date.now() - t} ms, no map built)`,
      );
      return n;
    }
  }
  const seed = await seedOf(ctx);
  return chunks.filter((c) => seed.find(c.hash, c.length) !== undefined).length;
}

/**
 * What the running slot holds: the indexes kept when its release was staged, else its bytes
 * hashed (its release's artifacts, or as much of the device as the new release spans when the
 * slot was installed by other means, that index then kept for the next download).
 */
async function seedOf(ctx: SeedContext): Promise<SeedMap> {
  if (ctx.seed) return ctx.seed;
  const map = new SeedMap();
  const device = ctx.store.device(ctx.running);
  const doc = await ctx.store.release(ctx.running);
  let running: Release | undefined;
  try {
    running = doc ? parseRelease(doc) : undefined;
  } catch {
    running = undefined;
  }
  const t = Date.now();
  let how = "";
  const kept = running ? await runningKept(ctx) : undefined;
  if (kept) {
    for (const k of kept) map.addIndex(k.index, k.offset);
    how = `release ${running!.version}, its kept indexes`;
  } else if (running) {
    for (const a of running.artifacts) {
      const index = await keptIndex(ctx, ctx.running, a);
      if (index) map.addIndex(index, a.offset);
      else await hashRegion(device, a.offset, a.offset + a.size, map);
    }
    how = `release ${running.version}`;
  } else {
    how = await deviceSeed(
      ctx,
      map,
      Math.max(...ctx.release.artifacts.map((a) => a.offset + a.size)),
    );
  }
  ctx.log?.(
    `adaptive: ${map.size} chunks of the running slot ${ctx.running} known in ${Date.now() - t} ms (${how})`,
  );
  ctx.seed = map;
  return map;
}

/**
 * The artifact's index from the first peer that has it, checked against release.yaml: every
 * machine fetching it from the channel would cost the channel about 1 % of a copy each. A peer
 * that kept none (404) stays a source of chunks; one that sends another index lied.
 */
async function indexFromPeers(ctx: SeedContext, a: Artifact): Promise<Buffer | undefined> {
  const peers = ctx.peers;
  if (peers === undefined || a.index === undefined) return undefined;
  for (const peer of peers.live()) {
    try {
      const b = await fetchDocument(peers.indexUrl(peer, a.name), a.index.size, {
        idleTimeoutMs: PEER_IDLE_TIMEOUT_MS,
      });
      if (digestOf(b) === a.index.digest) {
        peers.count(peer, b.length);
        return b;
      }
      peers.drop({
        peer,
        fault: "lied",
        artifact: a.name,
        detail: `the index of ${a.name} it sent has digest ${digestOf(b)}, release.yaml says ${a.index.digest}`,
      });
    } catch (e) {
      if ((e as Error)?.name === "AbortError") throw e;
      const fault = peerFault(e);
      if (fault !== "refused") {
        peers.drop({ peer, fault, detail: (e as Error).message, artifact: a.name });
      }
    }
  }
  return undefined;
}

/**
 * The index from its pages (./paged-index.ts) and the frames of the pack; undefined (and a
 * log line) when the release has none or they are refused: the plain index is fetched then.
 */
async function pagedIndex(
  ctx: SeedContext,
  a: Artifact,
  stats: SeedStats,
): Promise<ChunkIndex | "not-worth" | undefined> {
  if (a.indexTop === undefined || a.pack === undefined) return undefined;
  try {
    // Read while the top index and the sample travel.
    void runningKept(ctx);
    // The resume of an artifact begun adaptively needs the whole index: no sample then.
    const paged = await fetchPaged(ctx, a, stats, async (chunks) => {
      if ((await ctx.store.release(ctx.target)) !== undefined) return true;
      return (await heldOf(ctx, chunks)) >= (MIN_REUSE / 2) * chunks.length;
    });
    if (paged === "not-worth") {
      ctx.log?.(
        `artifact ${a.name}: a sample of its index pages finds almost nothing of it locally; downloading in full`,
      );
      return "not-worth";
    }
    // Without the codec (a build that does not carry zstd.wasm) the frames are of no use: the
    // plain index then. Loaded only here, once the download is adaptive (a full download
    // does not pay for instantiating the WebAssembly).
    await zstd();
    (ctx.frames ??= new Map()).set(a.name, paged.frames);
    ctx.log?.(
      `artifact ${a.name}: index from ${paged.reusedPages} kept and ${paged.fetchedPages} fetched page(s)`,
    );
    return paged.index;
  } catch (e) {
    if ((e as Error)?.name === "AbortError") throw e;
    ctx.log?.(
      `artifact ${a.name}: index pages refused (${(e as Error).message}); the plain index ${a.index!.path} is fetched and chunks travel plain`,
    );
    return undefined;
  }
}

/** Fetches and checks the artifact's index; undefined (and a log line) when it cannot be used. */
export async function fetchIndex(
  ctx: SeedContext,
  a: Artifact,
  stats: SeedStats,
): Promise<ChunkIndex | undefined> {
  if (a.index === undefined) return undefined;
  const what = `artifact ${a.name}: index ${a.index.path}`;
  // With live peers the index comes from them, as the chunks do: the channel then sends
  // release.yaml alone, and what no peer gives travels plain from the channel (docs/peers.md).
  // Pages and packs are the channel's way of sending less, for a machine on its own.
  if ((ctx.peers?.live().length ?? 0) === 0) {
    const paged = await pagedIndex(ctx, a, stats);
    if (paged === "not-worth") return undefined;
    if (paged !== undefined) return paged;
  }
  try {
    let bytes = await ctx.store.keptIndex(ctx.target, a.name);
    if (bytes === undefined || digestOf(bytes) !== a.index.digest) {
      bytes = await indexFromPeers(ctx, a);
      if (bytes === undefined) {
        bytes = await fetchDocument(
          artifactUrl(ctx.base, { name: a.name, path: a.index.path }),
          a.index.size,
        );
        stats.fetched += bytes.length;
        if (digestOf(bytes) !== a.index.digest) {
          ctx.log?.(
            `${what} has digest ${digestOf(bytes)}, release.yaml says ${a.index.digest}; downloading in full`,
          );
          return undefined;
        }
      }
      await ctx.store.keepIndex(ctx.target, a.name, bytes);
    }
    return ChunkIndex.parse(bytes, a.size, what);
  } catch (e) {
    ctx.log?.(`${(e as Error).message}; downloading in full`);
    return undefined;
  }
}

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
