// The download child: `liken agent download` in its own process, started and stopped by the
// daemon. Stopping it (a new target, SIGTERM) is a kill; the slot store's marker then leaves the
// slot writing or withdrawn, and the next download resumes from its checkpoints.
//
// The agent does not know how liken is started (a bundle, bin/liken.js, an installed package):
// whoever wires it (the `agent run` command) passes the entry script.
import { spawn, type ChildProcess } from "node:child_process";
import type { ReleaseRef } from "../api/types.js";
import type { Slot } from "../bootloader/types.js";
import { bootClockMs } from "./clock.js";

/** What `liken agent download` needs (src/cli/commands/agent-slots.ts defines its options). */
export interface DownloadRequest {
  /** The agent config file (slots, stateDir). */
  config: string;
  /** The channel's base URL. */
  source: string;
  release: ReleaseRef;
  /** The slot that runs: the download goes into the other one. */
  running: Slot;
}

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
  ];
}

export type DownloadEnd =
  | { kind: "staged"; release: ReleaseRef; slot: Slot }
  | { kind: "failed"; release: ReleaseRef; slot: Slot; exitCode: number | null; said: string }
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
}

/** Bytes of a download, as the status reports them. */
export interface DownloadBytes {
  bytesDone: number;
  bytesTotal: number;
  percent: number;
}

export class DownloadSupervisor {
  private running: Running | undefined;
  /** When the last attempt failed (ms since boot); cleared by a staged download. */
  private lastFailedAt: number | undefined;

  /**
   * @param entry the script that starts liken with process.execPath
   * @param onEnd told once per child, after it exited
   */
  constructor(
    private readonly entry: string,
    private readonly onEnd: (end: DownloadEnd) => void,
  ) {}

  /** The download in progress, if any. */
  get release(): ReleaseRef | undefined {
    return this.running?.release;
  }
  get idleSince(): number | undefined {
    return this.running?.idleSince;
  }
  get failedAt(): number | undefined {
    return this.lastFailedAt;
  }

  /** Counts an attempt as failed without a child (a refused release, a download without progress). */
  failed(at = bootClockMs()): void {
    this.lastFailedAt = at;
  }

  /** Starts the child for `r`; `total` is the release's size in bytes, for the progress. */
  start(r: DownloadRequest, slot: Slot, total: number): number | undefined {
    const child = spawn(process.execPath, [this.entry, ...downloadArgv(r)], {
      stdio: ["ignore", "ignore", "pipe"],
    });
    let said = "";
    child.stderr?.on("data", (b: Buffer) => (said = (said + b.toString("utf8")).slice(-2000)));
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
    };
    this.running = d;
    void exited.then((code) => {
      if (this.running === d) this.running = undefined;
      const base = { release: d.release, slot };
      if (code === 0) {
        this.lastFailedAt = undefined;
        this.onEnd({ kind: "staged", ...base });
      } else if (child.killed) {
        this.onEnd({ kind: "stopped", ...base });
      } else {
        this.lastFailedAt = bootClockMs();
        const last = said.trim().split("\n").pop() ?? "";
        this.onEnd({ kind: "failed", ...base, exitCode: code, said: last });
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
    durable: (slot: Slot, digest: string) => Promise<number>,
  ): Promise<DownloadBytes | undefined> {
    const d = this.running;
    if (d === undefined) return Promise.resolve(undefined);
    return durable(d.slot, d.release.digest).then((done) => {
      if (done !== d.done) {
        d.done = done;
        d.idleSince = bootClockMs();
      }
      const percent = d.total > 0 ? Math.floor((100 * done) / d.total) : 0;
      return { bytesDone: done, bytesTotal: d.total, percent };
    });
  }
}
