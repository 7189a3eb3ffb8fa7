// bench:delta's images as files, streamed: a slot of the day-1 guide is 4 GiB, more than a Buffer
// holds (readFileSync refuses a file over 2 GiB: ERR_FS_FILE_TOO_LARGE) and more than the
// bench should keep in memory. Every image written here is sparse (src/release/sparse.ts), so a
// mostly empty 4 GiB slot costs its used blocks on disk, not 4 GiB per copy.
import { createHash, randomBytes } from "node:crypto";
import { createReadStream, readFileSync } from "node:fs";
import { stat } from "node:fs/promises";
import path from "node:path";
import { SparseWriter } from "../src/release/sparse.js";
import { INDEX_CHUNK } from "../src/verify/chunk-index.js";
import { parseRelease } from "../src/verify/release.js";

const PIECE = 1024 * 1024;

/** The pieces of a file, each a whole number of 4 KiB chunks (the last may be shorter). */
async function* piecesOf(file: string): AsyncGenerator<Buffer> {
  for await (const p of createReadStream(file, { highWaterMark: PIECE })) yield p as Buffer;
}

/** The chunks of a file, 4 KiB each (pieces re-cut: a stream may end a piece mid-chunk). */
async function* chunksOf(file: string): AsyncGenerator<Buffer> {
  let rest = Buffer.alloc(0);
  for await (const p of piecesOf(file)) {
    const b = rest.length === 0 ? p : Buffer.concat([rest, p]);
    const whole = b.length - (b.length % INDEX_CHUNK);
    for (let o = 0; o < whole; o += INDEX_CHUNK) yield b.subarray(o, o + INDEX_CHUNK);
    rest = Buffer.from(b.subarray(whole));
  }
  if (rest.length > 0) yield rest;
}

/** A 4 KiB chunk's name in a set: 16 bytes of its SHA-256 (a set of a 4 GiB slot's is ~100 MB). */
const chunkKey = (c: Buffer): string =>
  createHash("sha256").update(c).digest().toString("latin1", 0, 16);

export async function sizeOf(file: string): Promise<number> {
  return (await stat(file)).size;
}

/** The slot a release makes: each artifact's bytes at its offset, sparse, in `out`. */
export async function slotOf(releaseDir: string, out: string): Promise<string> {
  const r = parseRelease(readFileSync(path.join(releaseDir, "release.yaml")));
  const w = await SparseWriter.create(out);
  let at = 0;
  for (const a of [...r.artifacts].sort((x, y) => x.offset - y.offset)) {
    if (a.offset < at) throw new Error(`${releaseDir}: artifact ${a.name} overlaps the one before`);
    w.hole(a.offset - at);
    for await (const p of piecesOf(path.join(releaseDir, a.path))) await w.write(p);
    at = a.offset + a.size;
  }
  await w.finish();
  return out;
}

/** Which 4 KiB chunks of `next` `prev` holds nowhere (the limit is their bytes). */
export async function missingOf(prev: string, next: string): Promise<boolean[]> {
  const have = new Set<string>();
  for await (const c of chunksOf(prev)) have.add(chunkKey(c));
  const missing: boolean[] = [];
  for await (const c of chunksOf(next)) missing.push(!have.has(chunkKey(c)));
  return missing;
}

/** `src` copied to `out` with a quarter of its blocks replaced in runs (a deterministic pattern). */
export async function largeChange(src: string, out: string): Promise<void> {
  const blocks = Math.ceil((await sizeOf(src)) / INDEX_CHUNK);
  // The runs to replace, as [first block, end block): every fourth run of 1-64 blocks.
  const runs: [number, number][] = [];
  for (let b = 0, n = 0; b < blocks; n++) {
    const run = 1 + ((n * 37) % 64);
    if (n % 4 === 0) runs.push([b, Math.min(b + run, blocks)]);
    b += run;
  }
  const w = await SparseWriter.create(out);
  let pos = 0;
  let r = 0;
  for await (const p of piecesOf(src)) {
    const piece = Buffer.from(p);
    const end = pos + piece.length;
    for (; r < runs.length && runs[r]![0] * INDEX_CHUNK < end; r++) {
      const from = Math.max(runs[r]![0] * INDEX_CHUNK, pos);
      const to = Math.min(runs[r]![1] * INDEX_CHUNK, end);
      randomBytes(to - from).copy(piece, from - pos);
      if (runs[r]![1] * INDEX_CHUNK > end) break; // the run goes on in the next piece
    }
    await w.write(piece);
    pos = end;
  }
  await w.finish();
}

/** `size` random bytes in `out` (nothing of it reusable). */
export async function randomFile(size: number, out: string): Promise<void> {
  const w = await SparseWriter.create(out);
  for (let done = 0; done < size; done += PIECE)
    await w.write(randomBytes(Math.min(PIECE, size - done)));
  await w.finish();
}

/** The SHA-256 of a file, streamed. */
export async function digestOfFile(file: string): Promise<string> {
  const h = createHash("sha256");
  for await (const p of piecesOf(file)) h.update(p);
  return h.digest("hex");
}

/** The bytes of `next`'s 4 KiB chunks that `prev` holds nowhere. */
export async function newContent(prev: string, next: string): Promise<number> {
  const missing = await missingOf(prev, next);
  return missing.filter(Boolean).length * INDEX_CHUNK;
}

/** The 4 KiB blocks of an image that are not all zero (what its filesystem uses), in bytes. */
export async function usedBytes(file: string): Promise<number> {
  const zero = Buffer.alloc(INDEX_CHUNK);
  let n = 0;
  for await (const c of chunksOf(file)) if (!c.equals(zero.subarray(0, c.length))) n += c.length;
  return n;
}
