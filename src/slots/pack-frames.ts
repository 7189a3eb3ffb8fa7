// The channel's chunks taken from the artifact's pack (./paged-index.ts) by the seeded writer
// (./seeded.ts): one Range request over the frames of a run of chunks, each frame decoded into
// at most its chunk's length and hashed against the index before it is written. A frame that
// fails is fetched once more on its own; failing again, PackFault, and the writer fetches the
// rest of the artifact's chunks plain.
import { createHash } from "node:crypto";
import { LikenError } from "../errors.js";
import { VerifyError } from "../verify/errors.js";
import {
  checkRangeReply,
  DEFAULT_IDLE_TIMEOUT_MS,
  discardBody,
  fetchFailure,
  get,
  type Response,
} from "../verify/fetch.js";
import { decodeFrame } from "../verify/zstd.js";
import { same } from "./chunker.js";
import { RangeIgnored } from "./seed-fallback.js";
import type { SeededJob } from "./seed-job.js";
import type { Sink } from "./seed-sink.js";

/** A pack frame refused twice: the rest of the artifact's chunks are fetched plain. */
export class PackFault extends Error {}

/** Reads one artifact's chunks from its pack into the sink. */
export class PackReader {
  constructor(
    private readonly s: SeededJob,
    private readonly pack: NonNullable<SeededJob["pack"]>,
    private readonly sink: Sink,
  ) {}

  /**
   * Fetches chunks first..last from the pack as zstd frames; each frame is decoded into at
   * most its chunk's length and hashed against the index. A frame that fails is fetched once
   * more on its own; failing again, PackFault (naming the chunk and both faults).
   */
  async fetchPacked(first: number, last: number, done: (i: number) => void): Promise<void> {
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

  /** One Range request over the pack; returns the first refused frame (the body dropped). */
  private async packRange(
    first: number,
    last: number,
    done: (i: number) => void,
  ): Promise<{ i: number; reason: string } | undefined> {
    const pack = this.pack;
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
      // A server that ignores Range would send the whole artifact for each plain range as
      // well: straight to the whole download, not one more request of the pack's kind.
      if (fault.kind === "ignored") throw new RangeIgnored(`GET ${pack.url.href}: ${fault.reason}`);
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
    const pack = this.pack;
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
    const idx = this.s.index;
    const len = idx.length(i);
    let data: Buffer;
    try {
      data = await decodeFrame(frame, len, `frame of chunk ${i}`);
    } catch (e) {
      if (e instanceof VerifyError) return e.message;
      throw e;
    }
    const digest = createHash("sha256").update(data).digest();
    if (!same(digest, idx.hash(i))) {
      return `frame of chunk ${i} decodes to sha256:${digest.toString("hex")}, the index says sha256:${idx.hash(i).toString("hex")}`;
    }
    await this.sink.push(idx.offset(i), [data]);
    return undefined;
  }
}
