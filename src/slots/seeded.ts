// The seeded writer: one artifact into the target slot from a plan (./seed-plan.ts), local
// chunks read from the running slot or found in place in the target, the rest fetched with
// single-range requests. Every chunk is hashed against the index before it is handed to the
// writer; the writer runs in whole-stream mode, so the artifact's SHA-256 is checked when it
// ends (and on read-back, as for every download) and a resume point carries the hash state.
//
// Anything that makes the plan unusable (a server that ignores or caps Range, a wrong
// Content-Range, bytes that do not match the index, a final digest that differs) throws
// SeedFallback with the reason; the caller downloads the rest in full (./adaptive.ts).
import { createHash } from "node:crypto";
import { open, type FileHandle } from "node:fs/promises";
import { setTimeout as delay } from "node:timers/promises";
import { LikenError } from "../errors.js";
import type { SlotWriter } from "../native/writer.js";
import type { ChunkIndex } from "../verify/chunk-index.js";
import { hexOf } from "../verify/digest.js";
import { VerifyError } from "../verify/errors.js";
import {
  checkRangeReply,
  DEFAULT_IDLE_TIMEOUT_MS,
  discardBody,
  fetchFailure,
  get,
  type Response,
} from "../verify/fetch.js";
import { Checkpointer, DEFAULT_ATTEMPTS, type ArtifactJob } from "./artifact.js";
import type { PeerFault, PeerSet } from "./peer-sources.js";
import type { Plan, Segment } from "./seed-plan.js";
import type { FrameTable } from "../verify/index-pages.js";
import { decodeFrame } from "../verify/zstd.js";

/** The adaptive download cannot go on; `restart` when nothing written can be kept. */
export class SeedFallback extends Error {
  constructor(
    readonly reason: string,
    readonly restart = false,
  ) {
    super(reason);
  }
}

/** A fetched chunk whose hash is not the index's: from a peer, the peer lied. */
export class ChunkMismatch extends SeedFallback {
  constructor(
    reason: string,
    /** The chunk whose bytes were wrong (the index's number). */
    readonly chunk: number,
  ) {
    super(reason);
  }
}

export interface SeedStats {
  /** Bytes copied from a local disk (checked against the index). */
  reused: number;
  /** Bytes received from the channel for this artifact (index included by the caller). */
  fetched: number;
  /** Range requests sent. */
  requests: number;
  /** Local chunks that did not match the index and were fetched instead. */
  corrupt: number;
  /** Bytes received from peers that passed the index check (docs/peers.md). */
  fromPeers?: number;
  /** Pack frames refused (did not decode, or decoded to another hash), each fetched again. */
  badFrames?: number;
}

export interface SeededJob {
  /** A whole-stream job: the artifact without `chunks`, so resume points carry hash state. */
  job: ArtifactJob;
  index: ChunkIndex;
  plan: Plan;
  devices: { running: string; target: string };
  stats: SeedStats;
  /** Peers to take remote ranges from before the channel (the release's, shared by artifacts). */
  peers?: PeerSet;
  /** The artifact's pack: channel ranges are fetched as zstd frames from it (./paged-index.ts). */
  pack?: { url: URL; size: number; frames: FrameTable };
}

/** A pack frame refused twice: the rest of the artifact's chunks are fetched plain. */
export class PackFault extends Error {}

/** Where one range request goes: a peer, or the channel (peer undefined). */
interface Source {
  url: URL;
  peer?: string;
  fetch?: ArtifactJob["fetch"];
}

/**
 * A peer is on the cluster's network: 5 s without a byte is a stall there (the channel's 30 s
 * allows for a loaded CDN edge), and the chunk is fetched from the next source at once.
 */
export const PEER_IDLE_TIMEOUT_MS = 5_000;

/**
 * A peer alive but slow (a failing disk, a saturated NIC) sends just often enough to beat the
 * idle timer and would hold the download for hours: over each window of this length, a peer
 * must deliver at least its floor (peerFloorBps), or it is dropped (`slow`) and its chunks go
 * to the next source. Ten seconds: long enough that one hiccup is not judged, short against a
 * download of minutes.
 */
export const PEER_SLOW_WINDOW_MS = 10_000;

/** The floor when the channel has not been measured yet: one 64 KiB piece a second. */
export const PEER_MIN_BPS = 64 * 1024;

/** "Far below the channel": a peer slower than a sixteenth of what the channel delivers. */
export const PEER_SLOW_FRACTION = 1 / 16;

/** The least a peer must deliver a second, given what the channel delivered (if measured). */
export function peerFloorBps(channelBps: number | undefined): number {
  return Math.max(PEER_MIN_BPS, (channelBps ?? 0) * PEER_SLOW_FRACTION);
}

/**
 * Whether a peer that sent `bytes` over `ms` (at least PEER_SLOW_WINDOW_MS) is too slow to
 * keep: below its floor. Undefined while the window is not full yet (nothing to judge).
 */
export function peerTooSlow(o: {
  bytes: number;
  ms: number;
  channelBps: number | undefined;
}): { bps: number; floor: number } | undefined {
  if (o.ms < PEER_SLOW_WINDOW_MS) return undefined;
  const bps = (o.bytes / o.ms) * 1000;
  const floor = peerFloorBps(o.channelBps);
  return bps < floor ? { bps, floor } : undefined;
}

/** A peer that delivered below its floor over a window (peerTooSlow). */
export class PeerTooSlow extends SeedFallback {}

/** How a peer's failure is named: a wrong chunk is a lie, the rest say what the wire did. */
export function peerFault(e: unknown): PeerFault {
  if (e instanceof ChunkMismatch) return "lied";
  if (e instanceof PeerTooSlow) return "slow";
  if (e instanceof SeedFallback) return "refused";
  if (e instanceof LikenError && e.code === "LIKEN_VERIFY_STALLED") return "stalled";
  if (e instanceof LikenError && e.code === "LIKEN_VERIFY_HTTP_STATUS") return "refused";
  return "unreachable";
}

/** Local reads gather chunks up to 1 MiB: few syscalls, a small buffer. */
const LOCAL_READ = 1024 * 1024;
const RETRY_BASE_MS = 100;

function same(a: Uint8Array, b: Uint8Array): boolean {
  return Buffer.compare(a, b) === 0;
}

/** Hands verified chunk bytes to the writer, dropping what precedes its resume position. */
class Sink {
  constructor(
    private readonly w: SlotWriter,
    private readonly cps: Checkpointer,
  ) {}

  async push(at: number, slices: Buffer[]): Promise<void> {
    for (const s of slices) {
      const skip = Math.max(0, this.w.position - at);
      if (skip < s.length) await this.w.write(skip > 0 ? s.subarray(skip) : s);
      at += s.length;
    }
    this.cps.maybe();
  }
}

class Seeder {
  private readonly handles = new Map<string, FileHandle>();
  private readonly idx: ChunkIndex;
  /** Each peer's current throughput window: bytes delivered, ms spent waiting on it. */
  private readonly pace = new Map<string, { bytes: number; ms: number }>();

  /** The pack while it holds (a frame refused twice turns it off for the artifact). */
  private pack: SeededJob["pack"];

  constructor(
    private readonly s: SeededJob,
    private readonly sink: Sink,
  ) {
    this.idx = s.index;
    this.pack = s.pack;
  }

  /**
   * Fetches chunks first..last from the pack as zstd frames; each frame is decoded into at
   * most its chunk's length and hashed against the index. A frame that fails is fetched once
   * more on its own; failing again, PackFault (naming the chunk and both faults).
   */
  private async fetchPacked(first: number, last: number, done: (i: number) => void): Promise<void> {
    let next = first;
    while (next <= last) {
      const bad = await this.packRange(next, last, (i) => {
        next = i + 1;
        done(i);
      });
      if (bad === undefined) return;
      this.s.stats.badFrames = (this.s.stats.badFrames ?? 0) + 1;
      const again = await this.packRange(bad.i, bad.i, (i) => {
        next = i + 1;
        done(i);
      });
      if (again !== undefined) {
        this.s.stats.badFrames++;
        throw new PackFault(
          `pack frame of chunk ${bad.i} refused: ${bad.reason}; fetched again: ${again.reason}`,
        );
      }
      this.s.job.log?.(
        `artifact ${this.s.job.artifact.name}: pack frame of chunk ${bad.i} refused (${bad.reason}); fetched again, it matched`,
      );
    }
  }

  /** Chunks first..last from the pack while it holds, else (and after PackFault) plain. */
  private async fromChannel(
    src: Source,
    first: number,
    last: number,
    done: (i: number) => void,
  ): Promise<void> {
    let next = first;
    const mark = (i: number): void => {
      next = i + 1;
      done(i);
    };
    if (this.pack !== undefined) {
      try {
        return await this.fetchPacked(first, last, mark);
      } catch (e) {
        if (!(e instanceof PackFault)) throw e;
        this.pack = undefined;
        const { job } = this.s;
        job.log?.(
          `artifact ${job.artifact.name}: ${e.message}; the pack is not used for the rest, chunks from ${next} are fetched plain from ${job.url.href}`,
        );
      }
    }
    await this.fetchRange(src, next, last, mark);
  }

  /** One Range request over the pack; returns the first refused frame (the body dropped). */
  private async packRange(
    first: number,
    last: number,
    done: (i: number) => void,
  ): Promise<{ i: number; reason: string } | undefined> {
    const pack = this.pack!;
    const f = pack.frames;
    const from = f.packOffset(first);
    const to = f.packOffset(last) + f.frameLength(last) - 1;
    const res = await get(pack.url, { range: `bytes=${from}-${to}` }, this.s.job.fetch);
    this.s.stats.requests++;
    const fault = checkRangeReply(res.status, res.headers, from, to, pack.size);
    if (fault !== undefined) {
      discardBody(res.body);
      if (fault.kind === "status" && (res.status >= 500 || res.status === 429)) {
        throw new VerifyError("LIKEN_VERIFY_HTTP_STATUS", `GET ${pack.url.href}: ${fault.reason}`, {
          retryable: true,
        });
      }
      throw new PackFault(`the pack ${pack.url.href} cannot be read by Range: ${fault.reason}`);
    }
    return this.readFrames(res.body, from, to, first, last, done);
  }

  /** Decodes a pack range's body frame by frame; the first refused frame ends it. */
  private async readFrames(
    body: Response["body"],
    from: number,
    to: number,
    first: number,
    last: number,
    done: (i: number) => void,
  ): Promise<{ i: number; reason: string } | undefined> {
    const pack = this.pack!;
    const f = pack.frames;
    let i = first;
    let pending: Buffer[] = [];
    let have = 0;
    let got = 0;
    try {
      for await (const piece of body) {
        const b = piece as Buffer;
        this.s.stats.fetched += b.length;
        got += b.length;
        if (got > to - from + 1) {
          throw new PackFault(
            `GET ${pack.url.href}: more than the ${to - from + 1} bytes asked for with bytes=${from}-${to}`,
          );
        }
        pending.push(b);
        have += b.length;
        while (i <= last && have >= f.frameLength(i)) {
          const all = pending.length === 1 ? pending[0]! : Buffer.concat(pending);
          const n = f.frameLength(i);
          const frame = all.subarray(0, n);
          const bad = await this.decodeChunk(i, frame);
          if (bad !== undefined) {
            discardBody(body);
            return { i, reason: bad };
          }
          done(i);
          i++;
          pending = have > n ? [all.subarray(n)] : [];
          have -= n;
        }
      }
    } catch (cause) {
      discardBody(body);
      if (cause instanceof PackFault || cause instanceof LikenError) throw cause;
      throw fetchFailure(
        pack.url,
        cause,
        this.s.job.fetch?.idleTimeoutMs ?? DEFAULT_IDLE_TIMEOUT_MS,
      );
    }
    if (i <= last) {
      throw new VerifyError(
        "LIKEN_VERIFY_CONNECTION",
        `GET ${pack.url.href}: the body of bytes=${from}-${to} ended after ${got} bytes`,
        { retryable: true },
      );
    }
    return undefined;
  }

  /** Decodes chunk i's frame, checks its hash and writes it; else the reason it was refused. */
  private async decodeChunk(i: number, frame: Buffer): Promise<string | undefined> {
    const len = this.idx.length(i);
    let data: Buffer;
    try {
      data = await decodeFrame(frame, len, `frame of chunk ${i}`);
    } catch (e) {
      if (e instanceof VerifyError) return e.message;
      throw e;
    }
    const digest = createHash("sha256").update(data).digest();
    if (!same(digest, this.idx.hash(i))) {
      return `frame of chunk ${i} decodes to sha256:${digest.toString("hex")}, the index says sha256:${this.idx.hash(i).toString("hex")}`;
    }
    await this.sink.push(this.idx.offset(i), [data]);
    return undefined;
  }

  private end(i: number): number {
    return this.idx.offset(i) + this.idx.length(i);
  }

  private async handle(device: string): Promise<FileHandle> {
    let h = this.handles.get(device);
    if (h === undefined) {
      // Read-only: the running slot is never opened for writing.
      h = await open(device, "r");
      this.handles.set(device, h);
    }
    return h;
  }

  async close(): Promise<void> {
    for (const h of this.handles.values()) await h.close();
  }

  async run(): Promise<void> {
    for (const seg of this.s.plan.segments) {
      if (seg.kind === "remote") await this.remote(seg.first, seg.last);
      else await this.local(seg);
    }
  }

  /** Reads a local segment window by window; a chunk that does not match is fetched. */
  private async local(seg: Extract<Segment, { kind: "local" }>): Promise<void> {
    const fh = await this.handle(this.s.devices[seg.device]);
    const base = this.idx.offset(seg.first);
    for (let i = seg.first; i <= seg.last;) {
      let j = i;
      while (j < seg.last && this.end(j + 1) - this.idx.offset(i) <= LOCAL_READ) j++;
      const len = this.end(j) - this.idx.offset(i);
      const buf = Buffer.allocUnsafe(len);
      const { bytesRead } = await fh.read(buf, 0, len, seg.at + this.idx.offset(i) - base);
      let bad = -1;
      for (let k = i; k <= j; k++) {
        const from = this.idx.offset(k) - this.idx.offset(i);
        const piece = buf.subarray(from, from + this.idx.length(k));
        const ok =
          from + this.idx.length(k) <= bytesRead &&
          same(createHash("sha256").update(piece).digest(), this.idx.hash(k));
        if (ok && bad >= 0) {
          await this.corrupt(seg.device, bad, k - 1);
          bad = -1;
        }
        if (ok) {
          await this.sink.push(this.idx.offset(k), [piece]);
          this.s.stats.reused += piece.length;
        } else if (bad < 0) bad = k;
      }
      if (bad >= 0) await this.corrupt(seg.device, bad, j);
      i = j + 1;
    }
  }

  /** Local bytes that differ from what the plan expected: fetched instead, and said. */
  private async corrupt(device: string, first: number, last: number): Promise<void> {
    this.s.stats.corrupt += last - first + 1;
    this.s.job.log?.(
      `artifact ${this.s.job.artifact.name}: ${last - first + 1} chunk(s) from ${this.idx.offset(first)} ` +
        `read from the ${device} slot do not match the index (the slot changed or is corrupt); fetched instead`,
    );
    await this.remote(first, last);
  }

  /**
   * Fetches chunks first..last: from each live peer in turn (a peer that fails is dropped for
   * the release and the chunks it did not deliver go to the next source), then the channel.
   */
  private async remote(first: number, last: number): Promise<void> {
    let next = first;
    const peers = this.s.peers;
    for (const peer of peers?.live() ?? []) {
      const src: Source = {
        url: peers!.url(peer, this.s.job.artifact.name),
        peer,
        fetch: {
          ...this.s.job.fetch,
          idleTimeoutMs: Math.min(
            this.s.job.fetch?.idleTimeoutMs ?? PEER_IDLE_TIMEOUT_MS,
            PEER_IDLE_TIMEOUT_MS,
          ),
        },
      };
      try {
        await this.fetchRange(src, next, last, (i) => (next = i + 1));
        return;
      } catch (e) {
        if ((e as Error)?.name === "AbortError") throw e;
        const fault = peerFault(e);
        const artifact = this.s.job.artifact.name;
        // The wrong chunk itself; otherwise the first one it did not deliver, where it failed.
        const chunk = e instanceof ChunkMismatch ? e.chunk : next;
        peers!.drop({ peer, fault, detail: (e as Error).message, artifact, chunk });
        this.s.job.log?.(
          `artifact ${this.s.job.artifact.name}: peer ${peer} ${fault} (${(e as Error).message}); ` +
            `dropped for this release, chunks from ${next} fetched elsewhere`,
        );
      }
    }
    await this.channel(next, last);
  }

  /** Fetches chunks first..last from the channel with one Range request, retrying transient failures. */
  private async channel(first: number, last: number): Promise<void> {
    const attempts = this.s.job.attempts ?? DEFAULT_ATTEMPTS;
    const { job } = this.s;
    const src: Source = { url: job.url, ...(job.fetch ? { fetch: job.fetch } : {}) };
    let next = first;
    for (let attempt = 1; ; attempt++) {
      const t0 = Date.now();
      const before = this.s.stats.fetched;
      try {
        await this.fromChannel(src, next, last, (i) => (next = i + 1));
        this.s.peers?.noteChannel(this.s.stats.fetched - before, Date.now() - t0);
        return;
      } catch (e) {
        // Our own stop (the download is being killed) is neither a fallback nor a retry.
        if (e instanceof SeedFallback || (e as Error)?.name === "AbortError") throw e;
        if (!(e instanceof LikenError) || !e.retryable || attempt >= attempts) {
          throw new SeedFallback((e as Error).message);
        }
        this.s.job.log?.(
          `artifact ${this.s.job.artifact.name}: range attempt ${attempt} failed (${e.message}); retrying`,
        );
        await delay(RETRY_BASE_MS * 2 ** (attempt - 1));
      }
    }
  }

  /**
   * Adds what a peer just delivered to its window (time spent waiting on it, across ranges:
   * a slow peer given many small ranges is judged as one given a long one), and throws
   * PeerTooSlow when a full window fell below the floor.
   */
  private paced(peer: string, url: URL, bytes: number, ms: number): void {
    const w = this.pace.get(peer) ?? { bytes: 0, ms: 0 };
    w.bytes += bytes;
    w.ms += ms;
    this.pace.set(peer, w);
    const slow = peerTooSlow({ ...w, channelBps: this.s.peers?.channelBps() });
    if (w.ms >= PEER_SLOW_WINDOW_MS) this.pace.set(peer, { bytes: 0, ms: 0 });
    if (slow === undefined) return;
    throw new PeerTooSlow(
      `GET ${url.href}: ${Math.round(slow.bps)} bytes/s over the last ${Math.round(w.ms / 1000)} s, below the floor of ${Math.round(slow.floor)} bytes/s (a sixteenth of what the channel delivers, at least ${PEER_MIN_BPS})`,
    );
  }

  /** Reads a checked 206's body chunk by chunk into the sink; returns the bytes received. */
  private async readBody(
    src: Source,
    body: Response["body"],
    from: number,
    to: number,
    first: number,
    done: (i: number) => void,
    started: number,
  ): Promise<number> {
    const url = src.url;
    const chunks = new Chunker(this.idx, first, url);
    let got = 0;
    let last = started;
    try {
      for await (const piece of body) {
        const b = piece as Buffer;
        // Only the wait for the peer counts, not this machine's own writing.
        if (src.peer !== undefined) this.paced(src.peer, url, b.length, Date.now() - last);
        // Channel bytes are counted as they arrive; a peer's only once they pass the index.
        if (src.peer === undefined) this.s.stats.fetched += b.length;
        got += b.length;
        if (got > to - from + 1) {
          throw new SeedFallback(
            `GET ${url.href}: more than the ${to - from + 1} bytes asked for with bytes=${from}-${to}`,
          );
        }
        const { good, wrong } = chunks.take(b);
        for (const c of good) {
          await this.sink.push(this.idx.offset(c.i), c.slices);
          done(c.i);
          if (src.peer !== undefined) {
            const n = this.idx.length(c.i);
            this.s.stats.fromPeers = (this.s.stats.fromPeers ?? 0) + n;
            this.s.peers?.count(src.peer, n);
          }
        }
        // Only after the chunks before it are kept: a read brings many chunks at once (64 KiB),
        // and each one verified is a chunk no other source has to send again.
        if (wrong !== undefined) throw wrong;
        last = Date.now();
      }
    } catch (cause) {
      discardBody(body);
      if (cause instanceof SeedFallback || cause instanceof LikenError) throw cause;
      throw fetchFailure(url, cause, src.fetch?.idleTimeoutMs ?? DEFAULT_IDLE_TIMEOUT_MS);
    }
    return got;
  }

  private async fetchRange(
    src: Source,
    first: number,
    last: number,
    done: (i: number) => void,
  ): Promise<void> {
    const { job } = this.s;
    const url = src.url;
    const from = this.idx.offset(first);
    const to = this.end(last) - 1;
    const started = Date.now();
    const res = await get(url, { range: `bytes=${from}-${to}` }, src.fetch);
    this.s.stats.requests++;
    const fault = checkRangeReply(res.status, res.headers, from, to, job.artifact.size);
    if (fault !== undefined) {
      discardBody(res.body);
      if (fault.kind === "status" && (res.status >= 500 || res.status === 429)) {
        throw new VerifyError("LIKEN_VERIFY_HTTP_STATUS", `GET ${url.href}: ${fault.reason}`, {
          retryable: true,
        });
      }
      throw new SeedFallback(fault.reason);
    }
    const got = await this.readBody(src, res.body, from, to, first, done, started);
    if (got < to - from + 1) {
      throw new VerifyError(
        "LIKEN_VERIFY_CONNECTION",
        `GET ${url.href}: the body of bytes=${from}-${to} ended after ${got} bytes`,
        { retryable: true },
      );
    }
  }
}

/** Cuts a range's body into the index's chunks and checks each one's hash as it completes. */
class Chunker {
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

/**
 * Writes the artifact from the writer's position by the plan. Returns normally only when the
 * whole artifact is written and its SHA-256 matches release.yaml; the writer is then finished.
 * On SeedFallback the writer is left open (every byte handed to it was verified), for the
 * caller to take a resume point from.
 */
export async function writeSeeded(s: SeededJob, w: SlotWriter): Promise<void> {
  const cps = new Checkpointer(s.job, w);
  const seeder = new Seeder(s, new Sink(w, cps));
  try {
    await seeder.run();
  } finally {
    await seeder.close();
    await cps.settle().catch(() => {});
  }
  await cps.settle();
  const { digest } = await w.finish();
  if (digest !== hexOf(s.job.artifact.digest)) {
    throw new SeedFallback(
      `the chunks the index names make sha256:${digest}, release.yaml says ${s.job.artifact.digest}: the index lies about the artifact`,
      true,
    );
  }
}
