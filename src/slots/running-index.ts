// The running slot's chunk indexes, for a slot whose release is recorded: each artifact's index
// as it was kept (by the installer, or by the download that staged the slot) when it is the
// one release.yaml names, else made once from the slot's bytes by a resumable pass
// (./index-pass.ts) and kept. A pass whose index is the release's is kept under the artifact's
// name, so no later download reads the slot for it; one that is not says so: the slot's bytes
// differ from the release it records (changed in place, or a disk that rots), and the pass
// stays as the slot's own index, so the next download does not read the slot again either.
import { ChunkIndex } from "../verify/chunk-index.js";
import { digestOf } from "../verify/digest.js";
import type { Artifact, Release } from "../verify/release.js";
import type { SlotName } from "./config.js";
import { dropPass, runIndexPass } from "./index-pass.js";
import type { IndexingProgress, SeedContext } from "./seed-context.js";
import type { SeedMap } from "./seed-map.js";

export type KeptOf = { index: ChunkIndex } | { why: string; mismatch: boolean };

/** The index kept for artifact `a` of the slot's release, or why there is none to use. */
export async function keptOf(ctx: SeedContext, slot: SlotName, a: Artifact): Promise<KeptOf> {
  if (a.index === undefined)
    return { why: `its release names no chunk index of ${a.name}`, mismatch: false };
  const bytes = await ctx.store.keptIndex(slot, a.name);
  if (bytes === undefined) return { why: `no index of ${a.name} was kept`, mismatch: false };
  const got = digestOf(bytes);
  if (got !== a.index.digest)
    return {
      why: `the index kept for ${a.name} has digest ${got}, release.yaml says ${a.index.digest}`,
      mismatch: true,
    };
  try {
    return { index: ChunkIndex.parse(bytes, a.size, `kept index of ${a.name}`) };
  } catch (e) {
    return { why: (e as Error).message, mismatch: true };
  }
}

/** What an index pass found: undefined when its index is the release's (then kept). */
function differs(
  ctx: SeedContext,
  running: Release,
  a: Artifact,
  bytes: Buffer,
): string | undefined {
  if (a.index === undefined) return undefined;
  const got = digestOf(bytes);
  if (got === a.index.digest) return undefined;
  return (
    `slot ${ctx.running}'s ${a.name} does not hold release ${running.version}'s bytes: indexed ` +
    `from the slot, its index has digest ${got}, release.yaml says ${a.index.digest} (the slot ` +
    `changed or is corrupt); only chunks that check out are reused, and the next release ` +
    `written there replaces it`
  );
}

/**
 * Adds each artifact of the running release to `map`: from its kept index, else from one
 * index pass over its bytes (resumed where an earlier attempt stopped). Says how.
 */
export async function indexRunning(
  ctx: SeedContext,
  running: Release,
  doc: Buffer,
  map: SeedMap,
): Promise<string> {
  const slot = ctx.running;
  const todo: { a: Artifact; why: string }[] = [];
  const notes: string[] = [];
  for (const a of running.artifacts) {
    const k = await keptOf(ctx, slot, a);
    if ("index" in k) map.addIndex(k.index, a.offset);
    else {
      todo.push({ a, why: k.why });
      if (k.mismatch) notes.push(`slot ${slot}: ${k.why}; the slot is indexed again`);
    }
  }
  if (todo.length === 0) return `release ${running.version}, its kept indexes`;
  const total = todo.reduce((n, t) => n + t.a.size, 0);
  let base = 0;
  const report = async (artifact: string, done: number): Promise<void> => {
    const note = notes.length > 0 ? { note: notes.join("; ") } : {};
    const p: IndexingProgress = { slot, artifact, done, total, ...note };
    await ctx.onIndexing?.(p);
  };
  let hashed = 0;
  for (const { a, why } of todo) {
    ctx.log?.(
      `running slot ${slot}: ${why}; indexing ${a.name} (${a.size} bytes) once, kept for later downloads`,
    );
    const r = await runIndexPass({
      store: ctx.store,
      slot,
      name: a.name,
      key: { release: digestOf(doc), offset: a.offset, size: a.size },
      map,
      ...(ctx.indexEvery === undefined ? {} : { every: ctx.indexEvery }),
      onProgress: (done) => report(a.name, base + done),
    });
    hashed += r.hashed;
    if (r.resumedAt > 0)
      ctx.log?.(
        r.hashed === 0
          ? `running slot ${slot}: ${a.name} was indexed by an earlier download; not read again`
          : `running slot ${slot}: ${a.name}'s index pass resumed at byte ${r.resumedAt} of ${a.size}`,
      );
    const note = differs(ctx, running, a, r.bytes);
    if (note === undefined) {
      if (a.index !== undefined) {
        await ctx.store.keepIndex(slot, a.name, r.bytes);
        await dropPass({ store: ctx.store, slot, name: a.name });
      }
    } else {
      notes.push(note);
      ctx.log?.(`warning: ${note}`);
    }
    base += a.size;
  }
  await report(todo[todo.length - 1]!.a.name, total);
  return `release ${running.version}, ${todo.map((t) => t.a.name).join(", ")} indexed (${hashed} bytes read)`;
}

/**
 * Chunks read from the running slot through its kept index did not hold what the index says:
 * the index does not match the slot's bytes (the slot changed, or the disk rots). Those chunks
 * were fetched instead; the kept indexes go, so that the next download indexes the slot again
 * rather than trusting them, and the note says so.
 */
export async function forgetKept(
  ctx: SeedContext,
  artifact: string,
  chunks: number,
): Promise<void> {
  const note =
    `slot ${ctx.running}: ${chunks} chunk(s) read while writing ${artifact} do not match the ` +
    `slot's kept index (the slot changed or is corrupt); they were fetched instead, the kept ` +
    `indexes are dropped, and the next download indexes the slot again`;
  ctx.log?.(`warning: ${note}`);
  await ctx.store.clearIndexes(ctx.running);
  await ctx.onIndexing?.({ slot: ctx.running, artifact, done: 0, total: 0, note });
}
