// Cutting a range's body into the chunks of the artifact's index (./seeded.ts): each chunk is
// hashed as its bytes arrive and handed on only once its SHA-256 is the index's, so a source
// that sends wrong bytes is caught at the chunk it got wrong, and every chunk before it is kept.
import { createHash } from "node:crypto";
import type { ChunkIndex } from "../verify/chunk-index.js";
import { ChunkMismatch } from "./seed-fallback.js";

/** Whether two digests are the same bytes. */
export function same(a: Uint8Array, b: Uint8Array): boolean {
  return Buffer.compare(a, b) === 0;
}

/** Cuts a range's body into the index's chunks and checks each one's hash as it completes. */
export class Chunker {
  private slices: Buffer[] = [];
  private h = createHash("sha256");
  private inChunk = 0;

  constructor(
    private readonly idx: ChunkIndex,
    private i: number,
    private readonly url: URL,
  ) {}

  /**
   * The chunks `b` completes that match the index, in order, up to the first that does not
   * (`wrong`: nothing from it on is taken; the source failed there).
   */
  take(b: Buffer): { good: { i: number; slices: Buffer[] }[]; wrong?: ChunkMismatch } {
    const good: { i: number; slices: Buffer[] }[] = [];
    for (let off = 0; off < b.length;) {
      const n = Math.min(this.idx.length(this.i) - this.inChunk, b.length - off);
      const part = b.subarray(off, off + n);
      this.h.update(part);
      this.slices.push(part);
      this.inChunk += n;
      off += n;
      if (this.inChunk < this.idx.length(this.i)) continue;
      const wrong = this.check();
      if (wrong !== undefined) return { good, wrong };
      good.push({ i: this.i, slices: this.slices });
      this.i++;
      this.slices = [];
      this.h = createHash("sha256");
      this.inChunk = 0;
    }
    return { good };
  }

  /** The completed chunk's mismatch, or undefined when its hash is the index's. */
  private check(): ChunkMismatch | undefined {
    const digest = this.h.digest();
    const want = this.idx.hash(this.i);
    if (same(digest, want)) return undefined;
    const from = this.idx.offset(this.i);
    return new ChunkMismatch(
      `bytes ${from}-${from + this.idx.length(this.i) - 1} (chunk ${this.i}) from ${this.url.href} have ` +
        `sha256:${digest.toString("hex")}, the index says sha256:${want.toString("hex")}: the server ` +
        `sent wrong bytes for the Range, or the index lies`,
      this.i,
    );
  }
}
