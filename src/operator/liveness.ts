// Notices that this process was paused (SIGSTOP, a VM freeze, a stalled node): a timer
// that should tick every TICK_MS finds the wall clock jumped. A copy that was paused has
// a stale view of everything; it treats the wake-up as a fresh start (the start-up grace
// again, heartbeats judged from now), so it cannot grant on what it saw before the pause.
// Its writes in flight are still guarded by the Cluster's resourceVersion.

/** How often the clock is checked. */
export const TICK_MS = 250;
/**
 * A gap this long means the process did not run. Node's event loop stalls for tens of
 * milliseconds (GC, a large JSON parse); on a starved machine (the benchmark at load 20 on
 * 2 cores) for up to ~3 s, which must not count as a pause: each wake-up costs a grace.
 */
export const PAUSE_MS = 5000;

export class PauseDetector {
  private last = Date.now();
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly onWake: (pausedMs: number, now: Date) => void) {}

  start(): void {
    this.last = Date.now();
    this.timer = setInterval(() => this.check(), TICK_MS);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  /** Also called right before a decision, so a wake-up is noticed before any grant. */
  check(now = Date.now()): boolean {
    const gap = now - this.last;
    this.last = now;
    if (gap >= PAUSE_MS) {
      this.onWake(gap, new Date(now));
      return true;
    }
    return false;
  }
}
