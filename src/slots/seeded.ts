// The seeded writer: one artifact into the target slot from a plan (./seed-plan.ts), local
// chunks read from the running slot or found in place in the target, the rest fetched with
// single-range requests. Every chunk is hashed against the index before it is handed to the
// writer; the writer runs in whole-stream mode, so the artifact's SHA-256 is checked when it
// ends (and on read-back, as for every download) and a resume point carries the hash state.
//
// Anything that makes the plan unusable (a server that ignores or caps Range, a wrong
// Content-Range, bytes that do not match the index, a final digest that differs) throws
// SeedFallback with the reason; the caller downloads the rest in full (./adaptive.ts).
//
// Here the order of sources (local disks, then peers, then the channel) and the Range
// requests; the chunk checks (./chunker.ts), the pack's frames (./pack-frames.ts), the judging
// of peers (./peer-judge.ts) and the writer's end (./seed-sink.ts) have modules of their own.
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
import { Chunker, same } from "./chunker.js";
import { PackFault, PackReader } from "./pack-frames.js";
import { PEER_IDLE_TIMEOUT_MS, PeerPace, peerFault } from "./peer-judge.js";
import type { Segment } from "./seed-plan.js";
import { ChunkMismatch, RangeIgnored, SeedFallback } from "./seed-fallback.js";
import type { SeededJob } from "./seed-job.js";
import { Sink } from "./seed-sink.js";

// The writer's pieces, named here as before they had modules of their own.
export { ChunkMismatch, SeedFallback } from "./seed-fallback.js";
export type { SeededJob, SeedStats } from "./seed-job.js";
export { PackFault } from "./pack-frames.js";
export {
  PEER_IDLE_TIMEOUT_MS,
  PEER_MIN_BPS,
  PEER_SLOW_FRACTION,
  PEER_SLOW_WINDOW_MS,
  peerFault,
  peerFloorBps,
  peerTooSlow,
  PeerTooSlow,
} from "./peer-judge.js";

/** Where one range request goes: a peer, or the channel (peer undefined). */
interface Source {
  url: URL;
  peer?: string;
  fetch?: ArtifactJob["fetch"];
}

/** Local reads gather chunks up to 1 MiB: few syscalls, a small buffer. */
const LOCAL_READ = 1024 * 1024;
const RETRY_BASE_MS = 100;

class Seeder {
  private readonly handles = new Map<string, FileHandle>();
  private readonly idx: ChunkIndex;
  private readonly pace: PeerPace;

  /** The pack while it holds (a frame refused twice turns it off for the artifact). */
  private pack: PackReader | undefined;

  constructor(
    private readonly s: SeededJob,
    private readonly sink: Sink,
  ) {
    this.idx = s.index;
    this.pace = new PeerPace(() => s.peers?.channelBps());
    this.pack = s.pack === undefined ? undefined : new PackReader(s, s.pack, sink);
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
        return await this.pack.fetchPacked(first, last, mark);
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
        if (src.peer !== undefined) this.pace.add(src.peer, url, b.length, Date.now() - last);
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
      if (fault.kind === "ignored") throw new RangeIgnored(`GET ${url.href}: ${fault.reason}`);
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
