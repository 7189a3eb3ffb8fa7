// One pass over a region of the running slot that makes its chunk index, for a slot whose
// release left none (or one that does not match): done once, kept, and resumable. A 4 GiB slot
// hashed at 6-14 MB/s (QEMU TCG) takes longer than a download attempt may go without progress,
// so a pass that started over on every attempt never ended (issue 50). Here the pass appends
// its entries to a file on the state partition and records how many are durable, so that the
// next attempt goes on from there (docs/adr/resumable-index-pass.md).
//
//   slot-<x>/index/<name>.pass       the index entries so far (44 bytes each), appended
//   slot-<x>/index/<name>.pass.json  what the pass describes and how many entries are durable
//
// Both live under index/, which withdrawing the slot drops with its kept indexes: a pass
// describes the bytes of a slot that runs, and nothing writes a running slot.
import { createHash } from "node:crypto";
import { open, readFile, rm, truncate, type FileHandle } from "node:fs/promises";
import path from "node:path";
import { fsyncPath } from "../native/index.js";
import { INDEX_CHUNK, INDEX_ENTRY, INDEX_HEADER, INDEX_MAGIC } from "../verify/chunk-index.js";
import { writeFileAtomic } from "./atomic.js";
import type { SlotName } from "./config.js";
import { SlotError } from "./errors.js";
import type { SeedMap } from "./seed-map.js";
import type { SlotStore } from "./store.js";

/**
 * Bytes hashed between two durable checkpoints: the download's own checkpoint (artifact.ts,
 * DEFAULT_CHECKPOINT_EVERY). At TCG's 6-14 MB/s a crash loses 5-10 s of hashing at most, and a
 * checkpoint appends 704 KiB of entries (16384 chunks) and rewrites a small JSON file.
 */
export const INDEX_PASS_EVERY = 64 * 1024 * 1024;

/** 1 MiB reads, as the map's own hashing (./seed-map.ts): the disk's speed, a small buffer. */
const READ = 1024 * 1024;

/** What a pass describes: the slot's release document (its digest) and the artifact's region. */
export interface PassKey {
  release: string;
  offset: number;
  size: number;
}

interface PassRecord extends PassKey {
  /** Entries durable in the .pass file (a longer file has a torn tail, cut off on resume). */
  chunks: number;
  /** The pass ended: the .pass file is the region's whole index (kept when it did not match). */
  done?: boolean;
}

export interface IndexPassJob {
  store: SlotStore;
  slot: SlotName;
  /** The artifact the region holds (names the files). */
  name: string;
  key: PassKey;
  /** Every chunk hashed or read back is added here, at its device offset. */
  map: SeedMap;
  every?: number;
  /** After each durable checkpoint: the bytes of the region indexed so far, of `total`. */
  onProgress?: (done: number, total: number) => Promise<void>;
}

export interface PassResult {
  /** The region's index (header and entries), as IndexWriter makes it. */
  bytes: Buffer;
  /** Where this attempt began (0: from the start; the size: the pass had ended before). */
  resumedAt: number;
  /** Bytes this attempt read and hashed. */
  hashed: number;
}

function files(j: IndexPassJob): { entries: string; record: string } {
  const dir = path.join(j.store.dir(j.slot), "index");
  return {
    entries: path.join(dir, `${j.name}.pass`),
    record: path.join(dir, `${j.name}.pass.json`),
  };
}

/** The durable entries of an earlier pass over the same bytes, or none (then the files go). */
async function earlier(j: IndexPassJob): Promise<{ rec: PassRecord; entries: Buffer } | undefined> {
  const f = files(j);
  let rec: PassRecord | undefined;
  let entries: Buffer | undefined;
  try {
    rec = JSON.parse((await readFile(f.record)).toString("utf8")) as PassRecord;
    entries = await readFile(f.entries);
  } catch {
    // None, or torn: a pass from the start.
  }
  const same =
    rec !== undefined &&
    entries !== undefined &&
    rec.release === j.key.release &&
    rec.offset === j.key.offset &&
    rec.size === j.key.size &&
    Number.isSafeInteger(rec.chunks) &&
    rec.chunks >= 0 &&
    rec.chunks * INDEX_ENTRY <= entries.length;
  if (!same) {
    await rm(f.entries, { force: true });
    await rm(f.record, { force: true });
    return undefined;
  }
  // Entries appended after the last record are not known to be whole: cut off, hashed again.
  const keep = rec!.chunks * INDEX_ENTRY;
  if (entries!.length > keep) await truncate(f.entries, keep);
  return { rec: rec!, entries: entries!.subarray(0, keep) };
}

/** The index bytes of `entries` for a region of `size` bytes (IndexWriter's layout). */
function indexOf(size: number, entries: Buffer): Buffer {
  const h = Buffer.alloc(INDEX_HEADER);
  h.write(INDEX_MAGIC, 0, "latin1");
  h.writeBigUInt64BE(BigInt(size), 8);
  h.writeUInt32BE(entries.length / INDEX_ENTRY, 16);
  return Buffer.concat([h, entries]);
}

function addEntries(map: SeedMap, entries: Buffer, base: number): void {
  for (let at = 0; at < entries.length; at += INDEX_ENTRY) {
    const off = entries.readUInt32BE(at) * 0x1_0000_0000 + entries.readUInt32BE(at + 4);
    map.add(entries.subarray(at + 12, at + 44), entries.readUInt32BE(at + 8), base + off);
  }
}

/**
 * Hashes `n` bytes of `buf` read at region offset `at`: their entries in one Buffer (not one
 * per chunk: a 4 GiB slot has a million), each chunk also added to the map.
 */
function hashPiece(j: IndexPassJob, buf: Buffer, n: number, at: number): Buffer {
  const out = Buffer.alloc(Math.ceil(n / INDEX_CHUNK) * INDEX_ENTRY);
  for (let o = 0, e = 0; o < n; o += INDEX_CHUNK, e += INDEX_ENTRY) {
    const len = Math.min(INDEX_CHUNK, n - o);
    const h = createHash("sha256")
      .update(buf.subarray(o, o + len))
      .digest();
    out.writeBigUInt64BE(BigInt(at + o), e);
    out.writeUInt32BE(len, e + 8);
    h.copy(out, e + 12);
    j.map.add(h, len, j.key.offset + at + o);
  }
  return out;
}

/** The region's bytes from `at` that make whole chunks (the region's last one however short). */
async function readPiece(
  j: IndexPassJob,
  device: FileHandle,
  buf: Buffer,
  at: number,
): Promise<number> {
  const { key } = j;
  const want = Math.min(buf.length, key.size - at);
  const { bytesRead } = await device.read(buf, 0, want, key.offset + at);
  const n = at + bytesRead >= key.size ? bytesRead : bytesRead - (bytesRead % INDEX_CHUNK);
  if (n === 0)
    throw new SlotError(
      "LIKEN_SLOT_INDEX_FAILED",
      `slot ${j.slot} (${j.store.device(j.slot)}): artifact ${j.name} ends at byte ${key.offset + key.size}, the device ends at ${key.offset + at + bytesRead}; the slot does not hold its release, and nothing of it is reused`,
      { context: { slot: j.slot, artifact: j.name, at: key.offset + at } },
    );
  return n;
}

/**
 * Indexes the region `key` of the slot's device in INDEX_CHUNK chunks (the last one shorter,
 * as `liken release build` cuts them), from where an earlier pass over the same bytes stopped.
 * The files stay until the caller says what to keep (dropPass).
 */
export async function runIndexPass(j: IndexPassJob): Promise<PassResult> {
  const { key } = j;
  const f = files(j);
  await j.store.ensureIndexDir(j.slot);
  const before = await earlier(j);
  if (before) addEntries(j.map, before.entries, key.offset);
  const parts: Buffer[] = before ? [before.entries] : [];
  if (before?.rec.done)
    return { bytes: indexOf(key.size, before.entries), resumedAt: key.size, hashed: 0 };
  const start = before ? before.rec.chunks * INDEX_CHUNK : 0;
  // Where the pass stands before it reads a byte: the status shows it at once.
  await j.onProgress?.(start, key.size);
  const every = j.every ?? INDEX_PASS_EVERY;
  const device = await open(j.store.device(j.slot), "r");
  const out = await open(f.entries, "a");
  let chunks = before?.rec.chunks ?? 0;
  try {
    const buf = Buffer.alloc(READ);
    let pending: Buffer[] = [];
    let last = start;
    for (let at = start; at < key.size;) {
      const n = await readPiece(j, device, buf, at);
      pending.push(hashPiece(j, buf, n, at));
      at += n;
      if (at - last < every && at < key.size) continue;
      const add = Buffer.concat(pending);
      // The entries are durable before the record counts them: a crash between the two
      // leaves a tail that the next pass cuts off.
      await out.write(add);
      await out.sync();
      parts.push(add);
      chunks += add.length / INDEX_ENTRY;
      pending = [];
      last = at;
      const rec: PassRecord = { ...key, chunks, done: at >= key.size };
      await writeFileAtomic(f.record, JSON.stringify(rec));
      await j.onProgress?.(at, key.size);
    }
  } finally {
    await out.close();
    await device.close();
  }
  return {
    bytes: indexOf(key.size, Buffer.concat(parts)),
    resumedAt: start,
    hashed: key.size - start,
  };
}

/**
 * The pass's index is the release's (kept by the caller under the artifact's name): its
 * files go. A pass whose index is not the release's stays, done, as the slot's own index.
 */
export async function dropPass(j: Pick<IndexPassJob, "store" | "slot" | "name">): Promise<void> {
  const dir = path.join(j.store.dir(j.slot), "index");
  await rm(path.join(dir, `${j.name}.pass`), { force: true });
  await rm(path.join(dir, `${j.name}.pass.json`), { force: true });
  fsyncPath(dir);
}
