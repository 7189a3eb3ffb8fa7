// The pack of an artifact (docs/releases.md, "Packs and index pages"): each chunk of its index
// as one zstd frame, in index order, in one file a plain HTTP server serves by Range; and the
// index cut into pages under a top index (../verify/index-pages.ts) that says each frame's
// length. Written by `liken release build` beside the artifact and its index.
import { open } from "node:fs/promises";
import { ChunkIndex } from "../verify/chunk-index.js";
import { paginate } from "../verify/index-pages.js";
import { PACK_LEVEL, zstd } from "../verify/zstd.js";

/** Output of one write: frames gathered up to 1 MiB. */
const FLUSH = 1024 * 1024;

export interface PackFacts {
  /** The pack's size (its digest is taken by the caller from the file). */
  packSize: number;
  top: Buffer;
  pages: Buffer;
}

/** Compresses `file`'s chunks as `index` cuts them into `packFile`; returns the paged index. */
export async function writePack(
  file: string,
  index: ChunkIndex,
  packFile: string,
  level = PACK_LEVEL,
): Promise<PackFacts> {
  const z = await zstd();
  const src = await open(file, "r");
  const dst = await open(packFile, "w");
  const chunks: { length: number; hash: Uint8Array; frame: number }[] = [];
  try {
    const out: Buffer[] = [];
    let pending = 0;
    const buf = Buffer.allocUnsafe(FLUSH);
    for (let i = 0; i < index.count;) {
      // Read a window of whole chunks, then compress each.
      let j = i;
      while (
        j + 1 < index.count &&
        index.offset(j + 1) + index.length(j + 1) - index.offset(i) <= FLUSH
      )
        j++;
      const len = index.offset(j) + index.length(j) - index.offset(i);
      const w = len <= FLUSH ? buf : Buffer.allocUnsafe(len);
      const { bytesRead } = await src.read(w, 0, len, index.offset(i));
      if (bytesRead !== len) throw new Error(`${file} changed while its pack was written`);
      for (let k = i; k <= j; k++) {
        const from = index.offset(k) - index.offset(i);
        const frame = z.compress(w.subarray(from, from + index.length(k)), level);
        out.push(Buffer.from(frame));
        pending += frame.length;
        chunks.push({ length: index.length(k), hash: index.hash(k), frame: frame.length });
      }
      if (pending >= FLUSH) {
        await dst.write(Buffer.concat(out));
        out.length = 0;
        pending = 0;
      }
      i = j + 1;
    }
    if (out.length > 0) await dst.write(Buffer.concat(out));
  } finally {
    await src.close();
    await dst.close();
  }
  const { top, pages, packSize } = paginate(index.size, chunks);
  return { packSize, top, pages };
}
