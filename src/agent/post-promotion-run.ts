// Runs the health gates again after promotion when postPromotionStep says so, and keeps the
// verdict for the next status report (status.ts, StatusExtras.postPromotionHealth). Its own
// HealthGates, so a trial boot's gate state (health-run.ts) is never touched; only on a steady
// boot (no trial armed or outstanding): a trial's gates are the trial's. One of the daemon's
// side parts (side-part.ts): it runs after a tick that waits; a new verdict is reported at once.
import type { Logger } from "pino";
import { rfc3339 } from "../api/time.js";
import type { PostPromotionHealth } from "../api/types.js";
import type { HealthGates } from "./health-run.js";
import type { Observation } from "./observe.js";
import { postPromotionStep, verdictOf } from "./post-promotion.js";
import type { SidePart } from "./side-part.js";
import type { StatusExtras } from "./status.js";
import type { Action } from "./steps.js";

export class PostPromotionGates implements SidePart {
  /** The verdict of the last run on this boot, reported with the next status. */
  verdict: PostPromotionHealth | undefined;

  constructor(
    private readonly gates: HealthGates,
    private readonly log: Logger,
  ) {}

  start(): void {}

  /** The gates again after promotion, when due: only after a tick that waits (nothing runs). */
  afterAction(seen: Observation, done: Action): Promise<boolean> {
    return done.kind === "wait" ? this.runIfDue(seen, new Date()) : Promise.resolve(false);
  }

  status(): Promise<Partial<StatusExtras>> {
    return Promise.resolve(this.verdict ? { postPromotionHealth: this.verdict } : {});
  }

  stop(): Promise<void> {
    return Promise.resolve();
  }

  /** Runs the gates when due; true when a new verdict is waiting to be reported. */
  async runIfDue(seen: Observation, now: Date): Promise<boolean> {
    const { o, cluster, machine } = seen;
    const running = o.running.release;
    if (o.boot.kind !== "steady" || running === undefined) return false;
    const step = postPromotionStep({
      running,
      bootID: o.bootId,
      cluster,
      gates: this.gates.seen(cluster).gates.length,
      last: this.verdict ?? machine?.status?.postPromotionHealth,
      now: now.getTime(),
    });
    if (step.kind === "idle") return false;
    this.log.info({ why: step.why }, "post-promotion health: running the gates");
    await this.gates.check(cluster);
    const check = this.gates.lastCheck();
    if (check === undefined) return false;
    this.verdict = verdictOf(check, running, o.bootId, rfc3339(now));
    return true;
  }
}
