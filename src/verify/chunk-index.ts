// The chunk index of an artifact: every chunk's offset, length and SHA-256, in artifact order.
// It is an artifact of its own that release.yaml names with its size and digest, so a machine
// trusts each chunk hash exactly as it trusts the artifact (docs/releases.md, "Chunk index";
// the chunking and its figures: docs/adr/adaptive-downloads.md).
//
// Binary, big-endian, 44 bytes a chunk (a 1 GiB artifact in 4 KiB chunks: 11 MiB), kept as one
// Buffer and read in place: no object per chunk, so the download child's memory stays flat.
//   header  "LKNIDX01" | artifact size u64 | chunk count u32            (20 bytes)
//   chunk   offset u64 | length u32 | sha256 (32 bytes)                (44 bytes each)
import { createHash } from "node:crypto";
import { VerifyError } from "./errors.js";

export const INDEX_MAGIC = "LKNIDX01";
export const INDEX_HEADER = 20;
export const INDEX_ENTRY = 44;
/** The chunk `liken release build` cuts: ext4's (and XFS's) block, so a file's unchanged
 * blocks are whole chunks wherever the new filesystem puts them. Measured in the ADR. */
export const INDEX_CHUNK = 4096;
/** No chunk below one filesystem block: the count a hostile index may claim is bounded by
 * the artifact's size before a byte of the index is fetched. */
export const MIN_INDEX_CHUNK = 4096;
/** A chunk is assembled in memory before its hash is checked: 4 MiB bounds that buffer. */
export const MAX_INDEX_CHUNK = 4 * 1024 * 1024;

/** The largest index a valid artifact of `size` bytes can have (every chunk the smallest). */
export function maxIndexBytes(size: number): number {
  return INDEX_HEADER + INDEX_ENTRY * Math.max(1, Math.ceil(size / MIN_INDEX_CHUNK));
}

/** A validated index, read in place. */
export class ChunkIndex {
  private constructor(
    readonly bytes: Buffer,
    readonly size: number,
    readonly count: number,
  ) {}

  offset(i: number): number {
    // Two 32-bit reads, not readBigUInt64BE: no BigInt a call (the index is read per chunk, and
    // parse() reads every offset before a download decides). The sum rounds as Number(BigInt)
    // does: hi * 2^32 is exact and one addition rounds to nearest.
    const at = INDEX_HEADER + i * INDEX_ENTRY;
    return this.bytes.readUInt32BE(at) * 0x1_0000_0000 + this.bytes.readUInt32BE(at + 4);
  }
  length(i: number): number {
    return this.bytes.readUInt32BE(INDEX_HEADER + i * INDEX_ENTRY + 8);
  }
  /** The chunk's SHA-256 (a view into the index, 32 bytes). */
  hash(i: number): Buffer {
    const at = INDEX_HEADER + i * INDEX_ENTRY + 12;
    return this.bytes.subarray(at, at + 32);
  }
  /** The first chunk that starts at or after `offset` (binary search; chunks are in order). */
  chunkAt(offset: number): number {
    let lo = 0;
    let hi = this.count;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.offset(mid) < offset) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /**
   * Validates an index for an artifact of `size` bytes. The bytes must already match the
   * digest release.yaml gives; these checks refuse an index that is well signed but wrong
   * (a broken or hostile build), naming the chunk and the fault.
   */
  static parse(bytes: Buffer, size: number, what: string): ChunkIndex {
    const fail = (fault: string, message: string, chunk?: number): never => {
      throw new VerifyError(
        "LIKEN_VERIFY_INDEX_INVALID",
        `${what}: ${message}; the index does not describe the artifact, so it is not used`,
        { context: { what, fault, ...(chunk !== undefined ? { chunk } : {}) } },
      );
    };
    if (bytes.length < INDEX_HEADER || bytes.toString("latin1", 0, 8) !== INDEX_MAGIC) {
      fail("format", `does not start with ${INDEX_MAGIC}`);
    }
    const declared = Number(bytes.readBigUInt64BE(8));
    if (declared !== size) {
      fail("size", `describes an artifact of ${declared} bytes, release.yaml says ${size}`);
    }
    const count = bytes.readUInt32BE(16);
    const most = Math.max(1, Math.ceil(size / MIN_INDEX_CHUNK));
    if (count > most) {
      fail(
        "too-many",
        `claims ${count} chunks; ${size} bytes in chunks of at least ${MIN_INDEX_CHUNK} have at most ${most}`,
      );
    }
    if (bytes.length !== INDEX_HEADER + INDEX_ENTRY * count) {
      fail(
        "format",
        `is ${bytes.length} bytes; a header and ${count} chunks take ${INDEX_HEADER + INDEX_ENTRY * count}`,
      );
    }
    const idx = new ChunkIndex(bytes, size, count);
    let end = 0;
    for (let i = 0; i < count; i++) {
      const off = idx.offset(i);
      const len = idx.length(i);
      if (off < end)
        fail(
          "overlap",
          `chunk ${i} starts at ${off}, inside chunk ${i - 1} (which ends at ${end})`,
          i,
        );
      if (off > end)
        fail("hole", `chunk ${i} starts at ${off}, leaving bytes ${end}-${off - 1} in no chunk`, i);
      if (len === 0 || len > MAX_INDEX_CHUNK) {
        fail("length", `chunk ${i} is ${len} bytes; a chunk has 1 to ${MAX_INDEX_CHUNK}`, i);
      }
      if (len < MIN_INDEX_CHUNK && i !== count - 1) {
        fail(
          "length",
          `chunk ${i} is ${len} bytes; only the last chunk may be shorter than ${MIN_INDEX_CHUNK}`,
          i,
        );
      }
      end = off + len;
      if (end > size)
        fail("past-size", `chunk ${i} ends at ${end}, past the artifact's ${size} bytes`, i);
    }
    if (end !== size)
      fail("hole", `the chunks end at ${end}, bytes ${end}-${size - 1} are in no chunk`);
    return idx;
  }
}

/** Cuts `data` into fixed chunks and returns the index bytes (one pass, for the builder). */
export class IndexWriter {
  private readonly parts: Buffer[] = [];
  private chunk = createHash("sha256");
  private inChunk = 0;
  private at = 0;

  constructor(private readonly chunkSize = INDEX_CHUNK) {}

  update(b: Buffer): void {
    for (let off = 0; off < b.length;) {
      const n = Math.min(this.chunkSize - this.inChunk, b.length - off);
      this.chunk.update(b.subarray(off, off + n));
      this.inChunk += n;
      off += n;
      if (this.inChunk === this.chunkSize) this.close();
    }
  }

  private close(): void {
    this.addChunk(this.chunk.digest(), this.inChunk);
    this.chunk = createHash("sha256");
    this.inChunk = 0;
  }

  /** Appends a chunk hashed elsewhere (only between whole chunks: after update() closed one). */
  addChunk(hash: Uint8Array, length: number): void {
    const e = Buffer.alloc(INDEX_ENTRY);
    e.writeBigUInt64BE(BigInt(this.at), 0);
    e.writeUInt32BE(length, 8);
    Buffer.from(hash).copy(e, 12);
    this.parts.push(e);
    this.at += length;
  }

  /** The index of everything passed to update(). An empty artifact has no chunk. */
  finish(): Buffer {
    if (this.inChunk > 0) this.close();
    const h = Buffer.alloc(INDEX_HEADER);
    h.write(INDEX_MAGIC, 0, "latin1");
    h.writeBigUInt64BE(BigInt(this.at), 8);
    h.writeUInt32BE(this.parts.length, 16);
    return Buffer.concat([h, ...this.parts]);
  }
}

/** Builds an index from entries (tests and tools that need a particular, possibly bad, index). */
export function encodeIndex(
  size: number,
  chunks: readonly { offset: number; length: number; hash: Uint8Array }[],
): Buffer {
  const b = Buffer.alloc(INDEX_HEADER + INDEX_ENTRY * chunks.length);
  b.write(INDEX_MAGIC, 0, "latin1");
  b.writeBigUInt64BE(BigInt(size), 8);
  b.writeUInt32BE(chunks.length, 16);
  chunks.forEach((c, i) => {
    const at = INDEX_HEADER + i * INDEX_ENTRY;
    b.writeBigUInt64BE(BigInt(c.offset), at);
    b.writeUInt32BE(c.length, at + 8);
    Buffer.from(c.hash).copy(b, at + 12);
  });
  return b;
}
