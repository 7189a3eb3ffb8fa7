// What the running slot holds, for the adaptive download (./adaptive.ts): the indexes its
// release kept when it was staged or installed (read once per release), else its bytes indexed
// once by a resumable pass and kept (./running-index.ts), into a map (./seed-map.ts); and how many of a sample of the new artifact's chunks it holds, counted
// against the kept indexes when they are all there, so that a new image is judged without the
// map ever being built. MIN_REUSE is the share below which reuse is not worth a plan.
import { deviceInfo } from "../native/index.js";
import { ChunkIndex, INDEX_CHUNK, INDEX_HEADER } from "../verify/chunk-index.js";
import { parseRelease, type Release } from "../verify/release.js";
import { indexRunning, keptOf } from "./running-index.js";
import type { Kept, SeedContext } from "./seed-context.js";
import { dropPass, runIndexPass } from "./index-pass.js";
import { countHeld, SeedMap } from "./seed-map.js";

/**
 * Below 2 % of the artifact found locally, the plain download is used: it writes through the
 * release's large chunks with no per-4 KiB hashing in JavaScript, so an artifact with nothing
 * to reuse is never slower than before (bench:delta's "large change" row).
 */
export const MIN_REUSE = 0.02;

/** The kept index of a running slot whose release is not recorded (installed by other means). */
const DEVICE_INDEX = "device";

/**
 * The running slot without a recorded release: the index of its first `span` bytes, kept from
 * an earlier download (the slot runs, so nothing of liken writes it; withdrawing a slot drops
 * its indexes), else indexed now by a pass that resumes, and kept.
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
  // Whole chunks only: a short tail of the device is no chunk of a release.
  const size = end - (end % INDEX_CHUNK);
  const slot = ctx.running;
  const job = { store: ctx.store, slot, name: DEVICE_INDEX };
  // One pass, resumed where an earlier attempt stopped (./index-pass.ts), as for a release.
  const r = await runIndexPass({
    ...job,
    key: { release: DEVICE_INDEX, offset: 0, size },
    map,
    ...(ctx.indexEvery === undefined ? {} : { every: ctx.indexEvery }),
    onProgress: (done, total) =>
      ctx.onIndexing?.({ slot, artifact: DEVICE_INDEX, done, total }) ?? Promise.resolve(),
  });
  await ctx.store.keepIndex(slot, DEVICE_INDEX, r.bytes);
  await dropPass(job);
  const resumed = r.resumedAt > 0 ? `, resumed at byte ${r.resumedAt}` : "";
  return `no release recorded: hashed from the device${resumed}, index kept`;
}

/**
 * The running release's kept indexes, one per artifact, when it left one for each (else
 * undefined: the slot must be hashed, which only the full map does). Read once, and begun
 * before the index pages are fetched, so that the disk and the network overlap.
 */
export function runningKept(ctx: SeedContext): Promise<Kept[] | undefined> {
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
    const k = await keptOf(ctx, ctx.running, a);
    if (!("index" in k)) return undefined;
    out.push({ index: k.index, offset: a.offset });
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
export async function heldOf(
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
 * What the running slot holds: the indexes kept when its release was staged or installed, else
 * its bytes indexed (its release's artifacts, once, resumably: ./running-index.ts; or as much of
 * the device as the new release spans when the slot was installed by other means), the index
 * then kept for the next download.
 */
export async function seedOf(ctx: SeedContext): Promise<SeedMap> {
  if (ctx.seed) return ctx.seed;
  const map = new SeedMap();
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
    how = await indexRunning(ctx, running, doc!, map);
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
