// The paged chunk index (docs/releases.md, "Packs and index pages"): the chunk index of an
// artifact cut into pages of PAGE_CHUNKS chunks, each page named by its SHA-256 in a small top
// index that release.yaml names by digest. A machine fetches the top, takes every page whose
// hash its running release's pages already have, and fetches only the others (by Range, from
// one file of all pages: no store of many small files). A page holds no absolute offset, so a
// stretch of chunks that did not change is the same page in both releases.
//
// Each chunk's entry also gives the length of its zstd frame in the release's pack (the
// chunks' frames, in order, in one file): the pack offset of a chunk is the page's pack offset
// plus the frames before it. Binary, big-endian:
//   top     "LKNTOP01" | artifact size u64 | chunk count u32 | chunks per page u32 |
//           page count u32 | pack size u64                                       (36 bytes)
//   page    sha256 (32) | offset in the pages file u64 | page length u32 |
//           artifact offset u64 | pack offset u64                                (60 bytes each)
//   entry   chunk length u32 | frame length u32 | sha256 (32)                    (40 bytes each)
import { createHash } from "node:crypto";
import {
  INDEX_ENTRY,
  INDEX_HEADER,
  INDEX_MAGIC,
  MAX_INDEX_CHUNK,
  MIN_INDEX_CHUNK,
} from "./chunk-index.js";
import { VerifyError } from "./errors.js";

export const TOP_MAGIC = "LKNTOP01";
export const TOP_HEADER = 36;
export const TOP_PAGE = 60;
export const PAGE_ENTRY = 40;
/** 256 chunks (1 MiB of a 4 KiB-chunked artifact) a page: a 10 KiB page, a 516 MiB image's top
 * index 31 KiB; a package's few changed files touch few pages. */
export const PAGE_CHUNKS = 256;
/** A frame no larger than zstd's bound for the largest chunk (incompressible data grows a little). */
const MAX_FRAME = MAX_INDEX_CHUNK + 64 * 1024;

export interface PageRef {
  hash: Buffer;
  /** Where the page's bytes are in the pages file. */
  at: number;
  length: number;
  /** The artifact offset and pack offset of the page's first chunk. */
  offset: number;
  packOffset: number;
}

/** The largest top index an artifact of `size` bytes can have. */
export function maxTopBytes(size: number): number {
  const chunks = Math.max(1, Math.ceil(size / MIN_INDEX_CHUNK));
  return TOP_HEADER + TOP_PAGE * Math.ceil(chunks / PAGE_CHUNKS);
}

/** A validated top index. */
export class TopIndex {
  private constructor(
    readonly bytes: Buffer,
    readonly size: number,
    readonly count: number,
    readonly perPage: number,
    readonly pages: number,
    readonly packSize: number,
  ) {}

  page(p: number): PageRef {
    const at = TOP_HEADER + p * TOP_PAGE;
    const b = this.bytes;
    return {
      hash: b.subarray(at, at + 32),
      at: Number(b.readBigUInt64BE(at + 32)),
      length: b.readUInt32BE(at + 40),
      offset: Number(b.readBigUInt64BE(at + 44)),
      packOffset: Number(b.readBigUInt64BE(at + 52)),
    };
  }

  /** Chunks in page p. */
  chunksIn(p: number): number {
    return Math.min(this.perPage, this.count - p * this.perPage);
  }

  static parse(bytes: Buffer, size: number, pagesSize: number, what: string): TopIndex {
    const fail = (message: string): never => {
      throw new VerifyError(
        "LIKEN_VERIFY_INDEX_INVALID",
        `${what}: ${message}; the top index does not describe the artifact, so it is not used`,
        { context: { what } },
      );
    };
    if (bytes.length < TOP_HEADER || bytes.toString("latin1", 0, 8) !== TOP_MAGIC) {
      fail(`does not start with ${TOP_MAGIC}`);
    }
    if (Number(bytes.readBigUInt64BE(8)) !== size) fail(`describes another size than ${size}`);
    const count = bytes.readUInt32BE(16);
    const perPage = bytes.readUInt32BE(20);
    const pages = bytes.readUInt32BE(24);
    const packSize = Number(bytes.readBigUInt64BE(28));
    if (count > Math.max(1, Math.ceil(size / MIN_INDEX_CHUNK))) fail(`claims ${count} chunks`);
    if (perPage < 1 || perPage > 65536) fail(`claims ${perPage} chunks a page`);
    if (pages !== Math.ceil(count / perPage)) fail(`has ${pages} pages for ${count} chunks`);
    if (bytes.length !== TOP_HEADER + TOP_PAGE * pages) fail(`is ${bytes.length} bytes`);
    const top = new TopIndex(bytes, size, count, perPage, pages, packSize);
    let at = 0;
    for (let p = 0; p < pages; p++) {
      const r = top.page(p);
      if (r.at !== at || r.length !== PAGE_ENTRY * top.chunksIn(p)) {
        fail(`page ${p} is not where the pages before it end, or of the wrong length`);
      }
      at += r.length;
    }
    if (at !== pagesSize) fail(`its pages take ${at} bytes, release.yaml says ${pagesSize}`);
    return top;
  }
}

/** Checks a page's bytes against the top index; the refusal names the page and both hashes. */
export function checkPage(top: TopIndex, p: number, bytes: Buffer, what: string): void {
  const want = top.page(p).hash;
  const got = createHash("sha256").update(bytes).digest();
  if (bytes.length === top.page(p).length && got.equals(want)) return;
  throw new VerifyError(
    "LIKEN_VERIFY_PAGE_MISMATCH",
    `${what}: page ${p} (${bytes.length} bytes) has sha256:${got.toString("hex")}, the top index says sha256:${want.toString("hex")}; refused`,
    { context: { what, page: p } },
  );
}

/** Where each chunk's frame is in the pack. */
export interface FrameTable {
  packOffset(i: number): number;
  frameLength(i: number): number;
}

/**
 * The classic chunk index (./chunk-index.ts) and the frame table from a top index and all its
 * pages (each already checked with checkPage). The caller compares the index's digest with
 * release.yaml's index digest: the pages then describe exactly the artifact's index.
 */
export function assemble(
  top: TopIndex,
  page: (p: number) => Buffer,
): { index: Buffer; frames: FrameTable } {
  const index = Buffer.alloc(INDEX_HEADER + INDEX_ENTRY * top.count);
  index.write(INDEX_MAGIC, 0, "latin1");
  index.writeBigUInt64BE(BigInt(top.size), 8);
  index.writeUInt32BE(top.count, 16);
  const packAt = new Float64Array(top.count);
  const frameLen = new Uint32Array(top.count);
  for (let p = 0; p < top.pages; p++) {
    const ref = top.page(p);
    const b = page(p);
    let off = ref.offset;
    let pack = ref.packOffset;
    for (let k = 0; k < top.chunksIn(p); k++) {
      const i = p * top.perPage + k;
      const e = k * PAGE_ENTRY;
      const len = b.readUInt32BE(e);
      const flen = b.readUInt32BE(e + 4);
      if (flen === 0 || flen > MAX_FRAME || pack + flen > top.packSize) {
        throw new VerifyError(
          "LIKEN_VERIFY_INDEX_INVALID",
          `page ${p}: chunk ${i}'s frame (${flen} bytes at ${pack}) lies outside the pack of ${top.packSize} bytes`,
          { context: { page: p, chunk: i } },
        );
      }
      const at = INDEX_HEADER + i * INDEX_ENTRY;
      index.writeBigUInt64BE(BigInt(off), at);
      index.writeUInt32BE(len, at + 8);
      b.copy(index, at + 12, e + 8, e + 40);
      packAt[i] = pack;
      frameLen[i] = flen;
      off += len;
      pack += flen;
    }
  }
  return {
    index,
    frames: { packOffset: (i) => packAt[i]!, frameLength: (i) => frameLen[i]! },
  };
}

/** Writes the pages and the top index of a chunk index and its frame lengths (the builder). */
export function paginate(
  size: number,
  chunks: readonly { length: number; hash: Uint8Array; frame: number }[],
  perPage = PAGE_CHUNKS,
): { top: Buffer; pages: Buffer; packSize: number } {
  const pageCount = Math.ceil(chunks.length / perPage);
  const top = Buffer.alloc(TOP_HEADER + TOP_PAGE * pageCount);
  top.write(TOP_MAGIC, 0, "latin1");
  top.writeBigUInt64BE(BigInt(size), 8);
  top.writeUInt32BE(chunks.length, 16);
  top.writeUInt32BE(perPage, 20);
  top.writeUInt32BE(pageCount, 24);
  const pages = Buffer.alloc(PAGE_ENTRY * chunks.length);
  let off = 0;
  let pack = 0;
  for (let p = 0; p < pageCount; p++) {
    const first = p * perPage;
    const n = Math.min(perPage, chunks.length - first);
    const pageAt = first * PAGE_ENTRY;
    const t = TOP_HEADER + p * TOP_PAGE;
    top.writeBigUInt64BE(BigInt(pageAt), t + 32);
    top.writeUInt32BE(n * PAGE_ENTRY, t + 40);
    top.writeBigUInt64BE(BigInt(off), t + 44);
    top.writeBigUInt64BE(BigInt(pack), t + 52);
    for (let k = 0; k < n; k++) {
      const c = chunks[first + k]!;
      const e = pageAt + k * PAGE_ENTRY;
      pages.writeUInt32BE(c.length, e);
      pages.writeUInt32BE(c.frame, e + 4);
      Buffer.from(c.hash).copy(pages, e + 8);
      off += c.length;
      pack += c.frame;
    }
    createHash("sha256")
      .update(pages.subarray(pageAt, pageAt + n * PAGE_ENTRY))
      .digest()
      .copy(top, t);
  }
  top.writeBigUInt64BE(BigInt(pack), 28);
  return { top, pages, packSize: pack };
}
