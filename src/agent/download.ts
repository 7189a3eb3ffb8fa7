// The download child: `liken agent download` in its own process, started and stopped by the
// daemon. Stopping it (a new target, SIGTERM) is a kill; the slot store's marker then leaves the
// slot writing or withdrawn, and the next download resumes from its checkpoints.
//
// The agent does not know how liken is started (a bundle, bin/liken.js, an installed package):
// whoever wires it (the `agent run` command) passes the entry script.
import { spawn, type ChildProcess } from "node:child_process";
import type { PeerDrop } from "../slots/peer-sources.js";
import { parsePeerDropped } from "./peer-dropped.js";
import { setPriority } from "node:os";
import type { DownloadStage, ReleaseRef } from "../api/types.js";
import type { Slot } from "../bootloader/types.js";
import { bootClockMs } from "./clock.js";
import { DEFAULT_TIMEOUTS } from "./phases.js";
import { NO_METER, type AgentMeter } from "./meter.js";

/** What `liken agent download` needs (src/cli/commands/agent-slots.ts defines its options). */
export interface DownloadRequest {
  /** The agent config file (slots, stateDir). */
  config: string;
  /** The channel's base URL. */
  source: string;
  release: ReleaseRef;
  /** The slot that runs: the download goes into the other one. */
  running: Slot;
  /** Peers the operator assigned (Cluster status.peerSources), tried before the channel. */
  peers?: readonly string[];
}

/**
 * Node flags of the download child: its peak RSS is the machine's memory budget for an update
 * (100 MiB), and what set it was not the bytes in flight but V8's compilers and collector.
 * Measured with heaptrack and /proc/self/smaps on a 256 MiB release (docs/testing.md):
 * - `--liftoff-only`: undici parses HTTP with llhttp compiled to WebAssembly. V8 first
 *   compiles it with Liftoff, then recompiles the hot parser with TurboFan on a worker thread,
 *   whose compile zones took 37 MiB of malloc'd memory at the peak (that thread's arena keeps
 *   it). Liftoff code parses a response's headers as well; a body is one span per read.
 *   Where Liftoff cannot compile undici's SIMD build, undici falls back to its plain build.
 * - `--no-opt`: the same for JavaScript: TurboFan's compile zones for the few hot functions
 *   of the stream (about 15 MiB at the peak); the interpreter and Sparkplug keep up with the
 *   disk, since each 64 KiB read costs a few calls and the hashing and writing are native.
 * - `--max-semi-space-size=1`: the reads' Buffers die young; V8's default young generation
 *   (16 MiB semi-spaces) lets tens of MiB of them pile up between scavenges.
 * Peak RSS of the child for that release (the writer's buffers freed as each artifact ends):
 * 106-131 MiB with the semi-space flag alone, 106-110 adding --liftoff-only, 89-94 with all
 * three (four or five runs each); bench:write runs its liken children with these flags.
 */
export const DOWNLOAD_NODE_FLAGS = ["--max-semi-space-size=1", "--liftoff-only", "--no-opt"];

/**
 * The download child's niceness. A download is background work: on a machine that serves,
 * its CPU (starting Node, parsing HTTP, hashing) must yield to the workloads and to the
 * agent's own loop, and it still gets every cycle nobody else wants. Measured in bench:agent,
 * where 20 agents, their 20 download children and the API server share two cores: at the
 * default priority the children starting right after their agents wrote `Downloading`
 * starved the API server, which then took 2-3 s per Machine status PUT of the agents still
 * waiting for theirs.
 */
export const DOWNLOAD_NICE = 10;

/** The arguments after the entry script: one builder for the agent and the lab's factory. */
export function downloadArgv(r: DownloadRequest): string[] {
  return [
    "agent",
    "download",
    "--config",
    r.config,
    "--source",
    r.source,
    "--version",
    r.release.version,
    "--digest",
    r.release.digest,
    "--running",
    r.running,
    ...(r.peers ?? []).flatMap((p) => ["--peer", p]),
  ];
}

/**
 * The n-th failed download in a row waits downloadRetryMs × 2^(n-1), at most this many times
 * it: at the defaults 1, 2, 4, 8, then every 16 min. A channel down for a night then costs a
 * fleet of 1,000 machines about one attempt a second, not 17 (one a minute each), and a
 * server that comes back is tried again within 16 min.
 */
export const RETRY_BACKOFF_MAX = 16;

/** How long the agent waits after `failures` failed downloads in a row. */
export function retryDelayMs(baseMs: number, failures: number): number {
  return baseMs * Math.min(RETRY_BACKOFF_MAX, 2 ** Math.max(0, failures - 1));
}

export type DownloadEnd =
  | { kind: "staged"; release: ReleaseRef; slot: Slot }
  | { kind: "failed"; release: ReleaseRef; slot: Slot; exitCode: number | null; said: string }
  /** Killed after `idleMs` without a new durable byte (failed() then stop()): a failure. */
  | { kind: "stalled"; release: ReleaseRef; slot: Slot; idleMs: number; said: string }
  /** Killed by stop(): neither a success nor a failure. */
  | { kind: "stopped"; release: ReleaseRef; slot: Slot };

interface Running {
  release: ReleaseRef;
  slot: Slot;
  child: ChildProcess;
  total: number;
  exited: Promise<number | null>;
  /** Bytes durable at the last look, and since when that number has not changed. */
  done: number;
  idleSince: number;
  /** Bytes reused and fetched at the last look (counted into the metrics as they grow). */
  reused: number;
  fetched: number;
  /** Bytes of the running slot indexed at the last look (src/slots/running-index.ts). */
  indexed?: number;
  /** failed() was called while it ran: its kill is a stall, not a stop. */
  stalledAt?: number;
}

/** Bytes of a download, as the status reports them. */
export interface DownloadBytes {
  bytesDone: number;
  bytesTotal: number;
  percent: number;
  /** Adaptive downloads (docs/releases.md): copied from local slots, and received. */
  bytesReused?: number;
  bytesFetched?: number;
  /** While the running slot is indexed (src/slots/running-index.ts): the stage and its percent. */
  stage?: DownloadStage;
  stagePercent?: number;
  /** What an index pass found wrong with the running slot (an Event, not a status field). */
  indexNote?: string;
}

/** What the slot's progress file says: durable bytes, and how many were reused and fetched. */
export interface Durable {
  done: number;
  reused: number;
  fetched: number;
  /** An index pass over the running slot: its bytes so far, and what it found. */
  indexing?: { done: number; total: number; note?: string };
}

export class DownloadSupervisor {
  private running: Running | undefined;
  /** When the last attempt failed (ms since boot); cleared by a staged download. */
  private lastFailedAt: number | undefined;
  /** Attempts failed in a row (the retry backs off on it, towards.ts); 0 once one stages. */
  private failedInARow = 0;

  /**
   * @param entry the script that starts liken with process.execPath
   * @param onEnd told once per child, after it exited
   */
  constructor(
    private readonly entry: string,
    private readonly onEnd: (end: DownloadEnd) => void,
    private readonly meter: AgentMeter = NO_METER,
    /** Hears of each peer the child dropped (peer-dropped.ts). */
    private readonly onPeerDropped: (release: ReleaseRef, d: PeerDrop) => void = () => {},
    /** Hears each other line the child logs (download-notice.ts reads the channel's faults). */
    private readonly onLine: (release: ReleaseRef, line: string) => void = () => {},
    /** The agent's downloadRetryMs (its config's timeouts), the backoff's first step. */
    private readonly retryBaseMs: number = DEFAULT_TIMEOUTS.downloadRetryMs,
  ) {}

  /** The download in progress, if any. */
  get release(): ReleaseRef | undefined {
    return this.running?.release;
  }
  get idleSince(): number | undefined {
    return this.running?.idleSince;
  }
  /**
   * When the retry delay counts from: the last failure, moved later by the backoff beyond
   * downloadRetryMs (towards.ts waits downloadRetryMs from it), so that the pure decision and
   * its golden steps stay as they are while the n-th retry waits retryDelayMs.
   */
  get failedAt(): number | undefined {
    if (this.lastFailedAt === undefined) return undefined;
    return this.lastFailedAt + this.retryInMs - this.retryBaseMs;
  }
  /** How long after the last failure the next attempt starts. */
  get retryInMs(): number {
    return retryDelayMs(this.retryBaseMs, this.failedInARow);
  }
  get failures(): number {
    return this.failedInARow;
  }

  /**
   * Counts an attempt as failed: without a child (a refused release), or the running one's,
   * which made no progress and is about to be stopped (its end then says "stalled").
   */
  failed(at = bootClockMs()): void {
    this.lastFailedAt = at;
    if (this.running !== undefined) this.running.stalledAt ??= at;
    else this.failedInARow++;
  }

  /** Starts the child for `r`; `total` is the release's size in bytes, for the progress. */
  start(r: DownloadRequest, slot: Slot, total: number): number | undefined {
    const child = spawn(
      process.execPath,
      [...DOWNLOAD_NODE_FLAGS, this.entry, ...downloadArgv(r)],
      {
        stdio: ["ignore", "ignore", "pipe"],
      },
    );
    if (child.pid !== undefined) lowerPriority(child.pid);
    let said = "";
    let partial = "";
    child.stderr?.on("data", (b: Buffer) => {
      const text = b.toString("utf8");
      said = (said + text).slice(-2000);
      const lines = (partial + text).split("\n");
      partial = lines.pop() ?? "";
      for (const l of lines) {
        const drop = parsePeerDropped(l);
        if (drop !== undefined) this.onPeerDropped(r.release, drop);
        else this.onLine(r.release, l);
      }
    });
    const exited = new Promise<number | null>((resolve) =>
      child.on("exit", (code) => resolve(code)),
    );
    const d: Running = {
      release: r.release,
      slot,
      child,
      total,
      exited,
      done: 0,
      idleSince: bootClockMs(),
      reused: 0,
      fetched: 0,
    };
    this.running = d;
    const began = Date.now();
    void exited.then((code) => {
      if (this.running === d) this.running = undefined;
      const base = { release: d.release, slot };
      if (!child.killed) this.meter.step("download", Date.now() - began, code === 0);
      if (code === 0) {
        this.meter.downloaded(d.done, d.total);
        this.lastFailedAt = undefined;
        this.failedInARow = 0;
        this.onEnd({ kind: "staged", ...base });
      } else if (child.killed && d.stalledAt !== undefined) {
        this.failedInARow++;
        this.onEnd({ kind: "stalled", ...base, idleMs: d.stalledAt - d.idleSince, said });
      } else if (child.killed) {
        this.onEnd({ kind: "stopped", ...base });
      } else {
        this.lastFailedAt = bootClockMs();
        this.failedInARow++;
        // The whole tail: the failure is its coded line, which a last log line may follow.
        this.onEnd({ kind: "failed", ...base, exitCode: code, said: said.trim() });
      }
    });
    return child.pid;
  }

  /** Kills the child and waits for it to exit. */
  async stop(): Promise<ReleaseRef | undefined> {
    const d = this.running;
    if (d === undefined) return undefined;
    d.child.kill("SIGTERM");
    await d.exited;
    this.running = undefined;
    return d.release;
  }

  /**
   * The bytes written so far, given how many are durable now (from the slot's progress file);
   * a change of that number restarts the idle clock the download timeout runs on.
   */
  progress(
    durable: (slot: Slot, digest: string) => Promise<Durable>,
  ): Promise<DownloadBytes | undefined> {
    const d = this.running;
    if (d === undefined) return Promise.resolve(undefined);
    return durable(d.slot, d.release.digest).then(({ done, reused, fetched, indexing }) => {
      // Indexing the running slot is progress too: on a slow disk it takes longer than the
      // download timeout, and a child killed for it would start the pass again (issue 50).
      if (indexing !== undefined && indexing.done !== (d.indexed ?? 0)) {
        d.indexed = indexing.done;
        d.idleSince = bootClockMs();
      }
      if (done !== d.done) {
        this.meter.downloaded(d.done, done);
        d.done = done;
        d.idleSince = bootClockMs();
      }
      if (reused > d.reused) this.meter.reused(reused - d.reused);
      if (fetched > d.fetched) this.meter.fetched(fetched - d.fetched);
      d.reused = Math.max(d.reused, reused);
      d.fetched = Math.max(d.fetched, fetched);
      const percent = d.total > 0 ? Math.floor((100 * done) / d.total) : 0;
      const adaptive =
        reused > 0 || fetched > 0 ? { bytesReused: reused, bytesFetched: fetched } : {};
      return {
        bytesDone: done,
        bytesTotal: d.total,
        percent,
        ...adaptive,
        ...indexingOf(indexing),
      };
    });
  }
}

/** Lowers the child's CPU priority; where the system refuses, the download runs as it is. */
function lowerPriority(pid: number): void {
  try {
    setPriority(pid, DOWNLOAD_NICE);
  } catch {
    // A child already gone, or a system without priorities: nothing to lower.
  }
}

/** The stage Indexing and its percent while the running slot is indexed; the pass's note. */
function indexingOf(
  i: Durable["indexing"],
): Pick<DownloadBytes, "stage" | "stagePercent" | "indexNote"> {
  if (i === undefined) return {};
  const note = i.note === undefined ? {} : { indexNote: i.note };
  if (i.done >= i.total) return note;
  return { stage: "Indexing", stagePercent: Math.floor((100 * i.done) / i.total), ...note };
}
