// The typed face of the streaming slot writer (native/writer.cc) and of read-back
// verification (native/readback.cc). Validation and defaults live here so C++ trusts its
// inputs; C++ failures come back as NativeError with a stable LIKEN_NATIVE_* code.
import path from "node:path";
import { deviceInfo, native, NativeError, type RawWriter } from "./index.js";

/** 4 MiB: large enough that a syscall and a queue hop per buffer cost nothing, small enough
 * that four of them (16 MiB) keep the agent's RSS far below its 100 MiB budget. */
export const DEFAULT_BUFFER_SIZE = 4 * 1024 * 1024;
/** Four buffers: one filling, one hashing, one writing, one spare to absorb jitter. */
export const DEFAULT_BUFFERS = 4;
/** Read-back buffers: two of 8 MiB (one read while the other is hashed). */
export const READBACK_BUFFER_SIZE = 8 * 1024 * 1024;

export interface SlotWriterOptions {
  /** Block device, partition or regular file that receives the artifact. */
  path: string;
  /** Where the artifact starts on the medium; a multiple of the medium's block size. */
  offset?: number;
  /** The declared size: the writer refuses any byte beyond it. */
  size: number;
  /** Resume: bytes of the artifact already durable (from a Checkpoint). */
  start?: number;
  /** Hash state from a Checkpoint (whole-stream mode only). */
  hashState?: Buffer;
  /** Chunk mode: chunk size and one hex SHA-256 per chunk, each checked before its write. */
  chunkSize?: number;
  chunkDigests?: readonly string[];
  /** O_DIRECT (default true): the page cache neither balloons nor hides the medium. */
  direct?: boolean;
  bufferSize?: number;
  buffers?: number;
}

export interface Checkpoint {
  /** Every artifact byte before this offset is on the medium (fdatasync). */
  offset: number;
  /** The SHA-256 state of exactly those bytes (whole-stream mode). */
  hashState: Buffer;
}

const WRITER_CODES: Record<string, { code: string; retryable: boolean }> = {
  "chunk-mismatch": { code: "LIKEN_NATIVE_CHUNK_MISMATCH", retryable: true },
  "beyond-size": { code: "LIKEN_NATIVE_BEYOND_SIZE", retryable: false },
  short: { code: "LIKEN_NATIVE_SHORT", retryable: true },
  state: { code: "LIKEN_NATIVE_BAD_STATE", retryable: false },
  aborted: { code: "LIKEN_NATIVE_ABORTED", retryable: false },
  io: { code: "LIKEN_NATIVE_IO", retryable: false },
};

function bad(message: string): NativeError {
  return new NativeError("LIKEN_NATIVE_BAD_ARGUMENT", message);
}

function mapWriterError(cause: unknown, target: string): NativeError {
  if (cause instanceof NativeError) return cause;
  const e = cause as { writerCode?: string; errno?: number; chunk?: number; message?: string };
  const kind = WRITER_CODES[e.writerCode ?? "io"] ?? WRITER_CODES.io!;
  return new NativeError(kind.code, `${target}: ${e.message ?? String(cause)}`, {
    cause,
    retryable: kind.retryable,
    ...(e.errno !== undefined ? { errno: e.errno } : {}),
    path: target,
    context: e.chunk !== undefined ? { chunk: e.chunk } : {},
  });
}

function isCount(v: unknown, min = 0): v is number {
  return typeof v === "number" && Number.isSafeInteger(v) && v >= min;
}

function checkChunks(o: SlotWriterOptions): Buffer | undefined {
  if (o.chunkDigests === undefined && o.chunkSize === undefined) return undefined;
  const { chunkSize, chunkDigests } = o;
  if (!isCount(chunkSize, 4096) || chunkSize % 4096 !== 0 || chunkDigests === undefined) {
    throw bad("chunkSize (a multiple of 4096) and chunkDigests go together");
  }
  const want = Math.max(1, Math.ceil(o.size / chunkSize));
  if (chunkDigests.length !== want) {
    throw bad(`${chunkDigests.length} chunk digests for ${want} chunks of ${chunkSize} bytes`);
  }
  if (o.hashState !== undefined) throw bad("chunk mode resumes at a chunk, without hash state");
  const out = Buffer.alloc(32 * want);
  chunkDigests.forEach((d, i) => {
    if (!/^[0-9a-f]{64}$/.test(d)) throw bad(`chunk digest ${i} is not 64 hex digits`);
    out.write(d, i * 32, "hex");
  });
  return out;
}

interface Plan {
  target: string;
  offset: number;
  start: number;
  bufSize: number;
  nbuf: number;
  align: number;
  chunks: Buffer | undefined;
}

function checkAligned(what: string, v: number, align: number, min = 0): void {
  if (!isCount(v, min) || v % align !== 0) {
    throw bad(`${what} ${v} is not a multiple of the block size ${align}`);
  }
}

function checkStart(o: SlotWriterOptions, start: number, bufSize: number, chunked: boolean): void {
  if (!isCount(start) || start > o.size || (start % bufSize !== 0 && start !== o.size)) {
    throw bad(`resume offset ${start} is not a buffer boundary within ${o.size} bytes`);
  }
  if (start > 0 && !chunked && o.hashState === undefined) {
    throw bad("resuming a whole-stream write needs the saved hash state");
  }
}

/** Validates and defaults a writer's options; the C++ side trusts the result. */
function plan(o: SlotWriterOptions): Plan {
  if (typeof o.path !== "string" || o.path.length === 0) throw bad("a slot path is required");
  if (!isCount(o.size, 0)) throw bad(`size ${o.size} is not a byte count`);
  const target = path.resolve(o.path);
  const offset = o.offset ?? 0;
  const start = o.start ?? 0;
  const chunks = checkChunks(o);
  const bufSize = chunks ? o.chunkSize! : (o.bufferSize ?? DEFAULT_BUFFER_SIZE);
  const nbuf = o.buffers ?? DEFAULT_BUFFERS;
  const align = deviceInfo(target).logicalBlockSize;
  checkAligned("offset", offset, align);
  checkAligned("buffer size", bufSize, align, align);
  if (!isCount(nbuf, 2)) throw bad("at least two buffers are needed to pipeline");
  checkStart(o, start, bufSize, chunks !== undefined);
  return { target, offset, start, bufSize, nbuf, align, chunks };
}

/**
 * Streams one artifact into a slot: write() copies into aligned buffers, a hash thread and a
 * write thread inside the addon do the rest. Nothing is durable before checkpoint()/finish().
 */
export class SlotWriter {
  private written: number;
  /** Milliseconds write() spent waiting for a free buffer: the medium or hashing was slower
   * than the network. Near zero means the network (or the main thread) is the limit. */
  waitedMs = 0;

  private constructor(
    private readonly raw: RawWriter,
    private readonly target: string,
    readonly size: number,
    start: number,
  ) {
    this.written = start;
  }

  static open(o: SlotWriterOptions): SlotWriter {
    const { target, offset, start, bufSize, nbuf, align, chunks } = plan(o);
    try {
      const raw = new (native().Writer)({
        path: target,
        base: offset,
        size: o.size,
        start,
        bufSize,
        nbuf,
        align,
        direct: o.direct ?? true,
        ...(chunks ? { chunkDigests: chunks } : {}),
        ...(o.hashState ? { hashState: o.hashState } : {}),
      });
      return new SlotWriter(raw, target, o.size, start);
    } catch (cause) {
      throw mapWriterError(cause, target);
    }
  }

  /** Bytes handed to the writer so far (not yet all durable). */
  get position(): number {
    return this.written;
  }

  /** Hands buf to the pipeline, waiting for a free buffer when all are busy. */
  async write(buf: Buffer): Promise<void> {
    try {
      let done = this.raw.push(buf);
      while (done < buf.length) {
        const t0 = performance.now();
        await this.raw.space();
        this.waitedMs += performance.now() - t0;
        done += this.raw.push(buf.subarray(done));
      }
      this.written += buf.length;
    } catch (cause) {
      throw mapWriterError(cause, this.target);
    }
  }

  /**
   * Syncs what the write thread has written so far (a prefix of the artifact) and returns it
   * as a resume point that survives a restart. Does not wait for the pipeline to drain.
   */
  async checkpoint(): Promise<Checkpoint> {
    try {
      return await this.raw.checkpoint();
    } catch (cause) {
      throw mapWriterError(cause, this.target);
    }
  }

  /**
   * Drains, checks that exactly `size` bytes arrived, syncs and closes. Returns the hex
   * SHA-256 of the whole artifact in whole-stream mode, null in chunk mode (every chunk was
   * checked before its write; readback() hashes the whole from the medium).
   */
  async finish(): Promise<{ digest: string | null }> {
    try {
      return await this.raw.finish();
    } catch (cause) {
      throw mapWriterError(cause, this.target);
    }
  }

  /** Stops the threads and closes the medium; what was written stays as it is. */
  abort(): void {
    this.raw.abort();
  }
}

/**
 * Bytes of write buffers this process's writers hold: allocated when a writer opens, freed
 * when it finishes or aborts (not when V8 collects it). Zero when no writer is open.
 */
export function writerBufferBytes(): number {
  return native().writerBufferBytes();
}

/**
 * Re-reads `size` bytes at `offset` of a slot with O_DIRECT and returns their hex SHA-256.
 * A medium that ends early fails with LIKEN_NATIVE_SHORT.
 */
export async function readback(
  target: string,
  opts: { offset?: number; size: number; direct?: boolean; bufferSize?: number },
): Promise<string> {
  if (typeof target !== "string" || target.length === 0) throw bad("a slot path is required");
  const p = path.resolve(target);
  const align = deviceInfo(p).logicalBlockSize;
  const offset = opts.offset ?? 0;
  const bufSize = opts.bufferSize ?? READBACK_BUFFER_SIZE;
  if (!isCount(opts.size)) throw bad(`size ${opts.size} is not a byte count`);
  checkAligned("offset", offset, align);
  checkAligned("buffer size", bufSize, align, align);
  try {
    const r = await native().readback({
      path: p,
      base: offset,
      size: opts.size,
      bufSize,
      align,
      direct: opts.direct ?? true,
    });
    return r.digest;
  } catch (cause) {
    const e = cause as { shortAt?: number; errno?: number; message?: string };
    const code = e.shortAt !== undefined ? "LIKEN_NATIVE_SHORT" : "LIKEN_NATIVE_IO";
    throw new NativeError(code, `read-back of ${target}: ${e.message ?? String(cause)}`, {
      cause,
      ...(e.errno !== undefined ? { errno: e.errno } : {}),
      path: p,
      context: e.shortAt !== undefined ? { shortAt: e.shortAt } : {},
    });
  }
}
