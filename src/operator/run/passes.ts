// When the operator decides: one pass per burst of events, never one per event. At 5,000
// Machines a wave's end is 500 Ready writes within a second, each a watch event; a pass per
// event would decide (over the whole fleet) and write the Cluster status 500 times. Instead:
//
//   event ──► dirty set ──(first event of a burst: BURST_MS timer)──► pass over the dirty keys
//                 ▲                                                        │
//                 └── events during a pass wait for it, then one more pass ┘
//                     (after one event-loop turn: the rest of the burst already received lands)
//
// The bound: a key made dirty is passed over at most BURST_MS after its first event when no
// pass runs, or one event-loop turn after the running pass ends. Later events of a burst never
// push the timer back (a debounce that restarts would starve a steady stream of events).
//
// Each pass reports how long its oldest event waited for it and how long it took (onPass):
// the operator's share of a grant's latency is their sum (bench/operator.ts prints both).
import { performance } from "node:perf_hooks";
import { setImmediate } from "node:timers";

/** How long the first event of a burst waits for the rest of it, at most (ms). */
export const BURST_MS = 5;

export interface PassOptions {
  /** Default BURST_MS; tests lower or raise it. */
  burstMs?: number;
  /** A pass that threw: the key is tried again after retryMs. */
  onError: (key: string, error: unknown) => void;
  retryMs?: number;
  /**
   * After each pass: how long the key's first event since its last pass waited for this one
   * to start (ms), and how long the pass took (ms).
   */
  onPass?: (key: string, waitMs: number, passMs: number) => void;
  /**
   * A pass still running after slowMs (default SLOW_PASS_MS): every later pass waits for it,
   * so a hung one would stop the operator without a word. Called once per such pass.
   */
  onSlow?: (key: string, runningMs: number) => void;
  slowMs?: number;
}

/**
 * A pass this long is named in the log: a pass is a decision and a few API requests, done in
 * well under a second even at 5,000 Machines (docs/operator-profile.md).
 */
export const SLOW_PASS_MS = 30_000;

/** Runs `pass` for each dirty key, one pass at a time, one per burst of events. */
export class PassScheduler {
  /** Each dirty key, and when (performance.now()) its first event since its last pass came. */
  private readonly dirty = new Map<string, number>();
  private timer: NodeJS.Timeout | undefined;
  private running = false;
  private active = true;
  /** Passes run, for tests and stats. */
  passes = 0;

  constructor(
    private readonly pass: (key: string) => Promise<void>,
    private readonly opts: PassOptions,
  ) {}

  schedule(key: string): void {
    if (!this.active) return;
    if (!this.dirty.has(key)) this.dirty.set(key, performance.now());
    if (this.running || this.timer !== undefined) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.drain();
    }, this.opts.burstMs ?? BURST_MS);
  }

  /** Takes events again after stop(). */
  start(): void {
    this.active = true;
  }

  /** Forgets what is dirty and takes no event until start(); a pass running ends alone. */
  stop(): void {
    this.active = false;
    clearTimeout(this.timer);
    this.timer = undefined;
    this.dirty.clear();
  }

  /** Passes over the dirty keys until none is left; a turn of the loop between two passes. */
  private async drain(): Promise<void> {
    if (this.running) return;
    this.running = true;
    try {
      while (this.dirty.size > 0) {
        const [key, since] = this.dirty.entries().next().value as [string, number];
        this.dirty.delete(key);
        this.passes++;
        const began = performance.now();
        const slow = setTimeout(
          () => this.opts.onSlow?.(key, performance.now() - began),
          this.opts.slowMs ?? SLOW_PASS_MS,
        );
        slow.unref();
        try {
          await this.pass(key);
          this.opts.onPass?.(key, began - since, performance.now() - began);
        } catch (e) {
          this.opts.onError(key, e);
          setTimeout(() => this.schedule(key), this.opts.retryMs ?? 1000).unref();
        } finally {
          clearTimeout(slow);
        }
        // Events that reached the socket while the pass ran (a status write's round trip is
        // most of it) are handed to their handlers in this turn's poll phase: let them land
        // before the next pass, so the burst is decided once, not once per slice of it.
        if (this.dirty.size > 0) await new Promise((r) => setImmediate(r));
      }
    } finally {
      this.running = false;
    }
  }
}
