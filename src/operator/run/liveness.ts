// Notices that this process was paused (SIGSTOP, a VM freeze, a stalled node): a timer
// that should tick every TICK_MS finds its clocks jumped. A copy that was paused has a stale
// view of everything; it treats the wake-up as a fresh start (the start-up grace again,
// heartbeats judged from now), so it cannot grant on what it saw before the pause. Its writes
// in flight are still guarded by the Cluster's resourceVersion.
//
// Two clocks are read, because each misses something: the monotonic clock stops while the
// machine is suspended (only the wall clock shows that gap), and the wall clock can be stepped
// (NTP, a person), forward or back, while the process ran all along. A forward step reads as a
// pause (a grace more: safe). A backward step is told apart: the wall clock fell behind the
// monotonic one. It hides nothing the operator judges (heartbeats are on the monotonic clock,
// machine-view.ts), but the start-up grace and its "granting resumes at" are wall times, and
// would hold every grant for as long as the step; the operator starts its grace again from
// the new wall time instead.
import { performance } from "node:perf_hooks";

/** How often the clock is checked. */
export const TICK_MS = 250;
/**
 * A gap this long means the process did not run. Node's event loop stalls for tens of
 * milliseconds (GC, a large JSON parse); on a starved machine (the benchmark at load 20 on
 * 2 cores) for up to ~3 s, which must not count as a pause: each wake-up costs a grace.
 * The same bound tells a backward step of the wall clock from the drift between two ticks.
 */
export const PAUSE_MS = 5000;

export type ClockJump =
  /** The process did not run (or the wall clock stepped forward): the view is stale. */
  | { kind: "paused"; ms: number }
  /** The wall clock was stepped back by `ms` while the process ran. */
  | { kind: "stepped-back"; ms: number };

/** What one tick saw: the gap on each clock since the last tick (pure, unit-tested). */
export function jumpOf(wallGapMs: number, monoGapMs: number): ClockJump | undefined {
  const gap = Math.max(wallGapMs, monoGapMs);
  if (gap >= PAUSE_MS) return { kind: "paused", ms: gap };
  if (monoGapMs - wallGapMs >= PAUSE_MS) return { kind: "stepped-back", ms: monoGapMs - wallGapMs };
  return undefined;
}

export interface Clocks {
  wall(): number;
  mono(): number;
}

export const SYSTEM_CLOCKS: Clocks = { wall: () => Date.now(), mono: () => performance.now() };

export class PauseDetector {
  private lastWall: number;
  private lastMono: number;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly onJump: (jump: ClockJump, now: Date, mono: number) => void,
    private readonly clocks: Clocks = SYSTEM_CLOCKS,
  ) {
    this.lastWall = clocks.wall();
    this.lastMono = clocks.mono();
  }

  start(): void {
    this.lastWall = this.clocks.wall();
    this.lastMono = this.clocks.mono();
    this.timer = setInterval(() => this.check(), TICK_MS);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  /**
   * Also called right before a decision, so a wake-up is noticed before any grant. True
   * when this copy was paused (its view is stale: decide nothing now).
   */
  check(): boolean {
    const wall = this.clocks.wall();
    const mono = this.clocks.mono();
    const jump = jumpOf(wall - this.lastWall, mono - this.lastMono);
    this.lastWall = wall;
    this.lastMono = mono;
    if (jump === undefined) return false;
    this.onJump(jump, new Date(wall), mono);
    return jump.kind === "paused";
  }
}
