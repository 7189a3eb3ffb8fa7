// One artifact from the channel into the slot: HTTP body -> native writer, resuming with Range
// after a dropped connection or a restart, refetching a chunk whose digest does not match
// before it is ever written, and refusing any byte beyond the declared size.
import { setTimeout as delay } from "node:timers/promises";
import { isLikenError, LikenError } from "../errors.js";
import { DEFAULT_BUFFER_SIZE, SlotWriter, type Checkpoint } from "../native/writer.js";
import { VerifyError } from "../verify/errors.js";
import {
  DEFAULT_IDLE_TIMEOUT_MS,
  discardBody,
  fetchFailure,
  openArtifact,
  type FetchOptions,
} from "../verify/fetch.js";
import { hexOf } from "../verify/digest.js";
import type { Artifact } from "../verify/release.js";

/** 64 MiB between durable resume points: a restart refetches at most this much, and the
 * drain + fdatasync it costs is a small fraction of the time to write 64 MiB (bmaptool syncs
 * every few MiB for the same reason: the page cache must not balloon, O_DIRECT already
 * keeps it flat here). */
export const DEFAULT_CHECKPOINT_EVERY = 64 * 1024 * 1024;
/** Attempts per artifact: transient failures (drops, stalls, 5xx, a bad chunk) retry. */
export const DEFAULT_ATTEMPTS = 5;
const RETRY_BASE_MS = 100;
const RETRY_MAX_MS = 2000;

export interface ArtifactJob {
  url: URL;
  artifact: Artifact;
  device: string;
  resume?: { offset: number; hashState?: Buffer };
  onCheckpoint(cp: { offset: number; hashState?: Buffer }): Promise<void>;
  checkpointEvery?: number;
  attempts?: number;
  fetch?: FetchOptions;
  direct?: boolean;
  log?: (msg: string) => void;
  /** Called once the artifact is written, with the writer's buffer wait (diagnostics). */
  onWritten?: (stats: { waitedMs: number }) => void;
}

/**
 * Whole-stream artifacts (no chunks) become durable one buffer at a time, so the buffer must
 * not be larger than the checkpoint interval, and a resume offset must fall on a buffer
 * boundary: the largest power of two up to 4 MiB that satisfies both.
 */
export function wholeStreamBuffer(every: number, start: number): number {
  let size = DEFAULT_BUFFER_SIZE;
  while (size > 4096 && (size > every || start % size !== 0)) size /= 2;
  return size;
}

export function openWriter(job: ArtifactJob, start: number, hashState?: Buffer): SlotWriter {
  const a = job.artifact;
  const every = job.checkpointEvery ?? DEFAULT_CHECKPOINT_EVERY;
  return SlotWriter.open({
    ...(a.chunks ? {} : { bufferSize: wholeStreamBuffer(every, start) }),
    path: job.device,
    offset: a.offset,
    size: a.size,
    start,
    direct: job.direct ?? true,
    ...(a.chunks ? { chunkSize: a.chunks.size, chunkDigests: a.chunks.digests } : {}),
    ...(!a.chunks && hashState ? { hashState } : {}),
  });
}

/** How long after a resume point that lagged the stream a second one is taken. */
const CATCH_UP_MS = 1000;

/**
 * Takes resume points while the body streams: at most one checkpoint in flight, not awaited
 * by the stream, so the pipeline keeps its buffers full while the medium syncs.
 *
 * A checkpoint does not wait for the pipeline to drain, so it may record less than was
 * handed to the writer. When the stream then stops (a stalled server, a long remote range),
 * no further write would take another: one more checkpoint CATCH_UP_MS later records what
 * the write thread finished meanwhile, so a kill during the stall loses nothing written.
 */
export class Checkpointer {
  private pending: Promise<void> | undefined;
  private failure: unknown;
  private next: number;
  private recorded = -1;
  private catchUp: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(
    private readonly job: ArtifactJob,
    private readonly w: SlotWriter,
  ) {
    this.next = w.position + (job.checkpointEvery ?? DEFAULT_CHECKPOINT_EVERY);
  }

  maybe(): void {
    if (this.failure !== undefined) throw this.failure;
    if (this.pending || this.w.position < this.next || this.w.position >= this.w.size) return;
    this.next = this.w.position + (this.job.checkpointEvery ?? DEFAULT_CHECKPOINT_EVERY);
    this.take(true);
  }

  private take(again: boolean): void {
    clearTimeout(this.catchUp);
    const chunked = this.job.artifact.chunks !== undefined;
    this.pending = this.w
      .checkpoint()
      .then(async (cp) => {
        // A catch-up that found nothing new drained is not written again.
        if (cp.offset === this.recorded) return;
        await this.job.onCheckpoint(chunked ? { offset: cp.offset } : cp);
        this.recorded = cp.offset;
        if (again && !this.stopped && cp.offset < this.w.position) {
          this.catchUp = setTimeout(() => {
            if (!this.pending && !this.stopped) this.take(false);
          }, CATCH_UP_MS);
          this.catchUp.unref();
        }
      })
      .catch((e: unknown) => {
        this.failure = e;
      })
      .finally(() => {
        this.pending = undefined;
      });
  }

  /** Waits for the checkpoint in flight; no checkpoint is taken after it. */
  async settle(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.catchUp);
    await this.pending;
    if (this.failure !== undefined) throw this.failure;
  }
}

/** Streams the body from writer.position to the end of the artifact. */
async function pump(job: ArtifactJob, w: SlotWriter): Promise<void> {
  const a = job.artifact;
  const idle = job.fetch?.idleTimeoutMs ?? DEFAULT_IDLE_TIMEOUT_MS;
  const cps = new Checkpointer(job, w);
  const { skip, body } = await openArtifact(job.url, w.position, a.size, job.fetch);
  let toSkip = skip;
  try {
    for await (const piece of body) {
      let b = piece as Buffer;
      if (toSkip > 0) {
        // The server ignored Range and sent the artifact from byte 0: drop what is on disk.
        const n = Math.min(toSkip, b.length);
        toSkip -= n;
        b = b.subarray(n);
        if (b.length === 0) continue;
      }
      if (w.position + b.length > a.size) {
        throw new VerifyError(
          "LIKEN_VERIFY_BEYOND_SIZE",
          `artifact ${a.name}: the server sent more than the declared size ${a.size}; refused before writing`,
          { context: { artifact: a.name, size: a.size } },
        );
      }
      await w.write(b);
      cps.maybe();
    }
  } catch (cause) {
    discardBody(body);
    await cps.settle().catch(() => {});
    throw isLikenError(cause) ? cause : fetchFailure(job.url, cause, idle);
  }
  await cps.settle();
  if (w.position < a.size) {
    throw new VerifyError(
      "LIKEN_VERIFY_CONNECTION",
      `artifact ${a.name}: the body ended after ${w.position} of ${a.size} bytes`,
      { retryable: true, context: { artifact: a.name } },
    );
  }
}

/** What to do after a failed attempt: where the next one starts, or give up. */
function recover(
  job: ArtifactJob,
  e: unknown,
  w: SlotWriter,
): { restartAt: number } | "continue" | "fail" {
  if (!(e instanceof LikenError) || !e.retryable) return "fail";
  const a = job.artifact;
  if (e.code === "LIKEN_NATIVE_CHUNK_MISMATCH" && a.chunks) {
    return { restartAt: Number(e.context.chunk) * a.chunks.size };
  }
  if (e.code === "LIKEN_VERIFY_ARTIFACT_MISMATCH") return { restartAt: 0 };
  if (e.code.startsWith("LIKEN_NATIVE_")) return "fail";
  return w.position <= a.size ? "continue" : "fail";
}

/** Puts the artifact's name in front of a failure that does not name it yet. */
function nameArtifact(e: unknown, name: string): unknown {
  if (e instanceof Error && !e.message.startsWith("artifact ")) {
    e.message = `artifact ${name}: ${e.message}`;
  }
  return e;
}

export async function writeArtifact(job: ArtifactJob): Promise<void> {
  const a = job.artifact;
  const attempts = job.attempts ?? DEFAULT_ATTEMPTS;
  let w = openWriter(job, job.resume?.offset ?? 0, job.resume?.hashState);
  for (let attempt = 1; ; attempt++) {
    try {
      await pump(job, w);
      const { digest } = await w.finish();
      if (digest !== null && digest !== hexOf(a.digest)) {
        throw new VerifyError(
          "LIKEN_VERIFY_ARTIFACT_MISMATCH",
          `artifact ${a.name}: received bytes have digest sha256:${digest}, release.yaml says ${a.digest}`,
          { retryable: true, context: { artifact: a.name } },
        );
      }
      job.onWritten?.({ waitedMs: w.waitedMs });
      return;
    } catch (e) {
      const next = recover(job, e, w);
      if (next === "fail" || attempt >= attempts) {
        w.abort();
        throw nameArtifact(e, a.name);
      }
      job.log?.(
        `artifact ${a.name}: attempt ${attempt} failed (${(e as Error).message}); retrying`,
      );
      if (next !== "continue") {
        w.abort();
        w = openWriter(job, next.restartAt);
      }
      await delay(Math.min(RETRY_MAX_MS, RETRY_BASE_MS * 2 ** (attempt - 1)));
    }
  }
}

export type { Checkpoint };
