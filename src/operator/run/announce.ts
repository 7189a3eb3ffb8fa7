// What a written decision says, where people look: each grant, release and stall, a revert
// started or retargeted, a rollout brake that begins to hold, as a log line, an Event on the
// Cluster, the metrics and the stats. Announced only once the status write that recorded it was
// accepted (operator.ts): a decision refused or replaced after a conflict happened nowhere.
// The other parts (Lost marks, channel reads, refusals) record their Events through event().
import type { Cluster, Machine } from "../../api/index.js";
import type { Decision } from "../decide/decide.js";
import { recordReasonOf } from "../revert/revert.js";
import type { EventReason, EventSink } from "../events.js";
import type { Logger } from "../logger.js";
import type { OperatorMetrics } from "./metrics.js";
import type { OperatorStats } from "./stats.js";

export class Announcer {
  constructor(
    private readonly log: Logger,
    private readonly events: EventSink,
    private readonly metrics: OperatorMetrics,
    private readonly stats: OperatorStats,
    /** The watched Machine of a name (the metrics' grant latency reads its request). */
    private readonly machine: (name: string) => Machine | undefined,
  ) {}

  announce(cluster: Cluster, d: Decision): void {
    this.metrics.decided(cluster.metadata.name, d, this.machine);
    this.turns(cluster, d);
    this.reverts(cluster, d);
    this.held(cluster, d);
  }

  /** An Event on the Cluster (best effort: events.ts), counted. */
  event(cluster: Cluster, type: "Normal" | "Warning", reason: EventReason, msg: string): void {
    this.stats.events++;
    this.events.record(cluster, type, reason, msg);
  }

  private turns(cluster: Cluster, d: Decision): void {
    const log = this.log;
    for (const g of d.grants) {
      this.stats.grants++;
      const msg = `granted a reboot turn to Machine ${g.machine} for ${g.version}${g.leader ? " (a leader)" : ""}; budget ${d.budget.text}; deadline ${g.deadline ?? "none"}`;
      log.info({ cluster: cluster.metadata.name, machine: g.machine, version: g.version }, msg);
      this.event(cluster, "Normal", "TurnGranted", msg);
    }
    for (const r of d.releases) {
      this.stats.releases++;
      const msg = `took back the reboot turn of Machine ${r.turn.machine} (${r.reason}): ${r.message}`;
      log.info({ cluster: cluster.metadata.name, machine: r.turn.machine, reason: r.reason }, msg);
      this.event(cluster, "Normal", "TurnReleased", msg);
    }
    for (const t of d.paused) {
      const msg = `Machine ${t.machine}'s reboot turn is ${t.drainPause?.message ?? "paused"}; it drains when the rules allow or asks again`;
      log.warn({ cluster: cluster.metadata.name, machine: t.machine }, msg);
      this.event(cluster, "Warning", "TurnPaused", msg);
    }
    for (const s of d.stalls) {
      this.stats.stalls++;
      log.warn({ cluster: cluster.metadata.name, machine: s.turn.machine }, s.message);
      this.event(cluster, "Warning", "RolloutStalled", `rollout stalled: ${s.message}`);
    }
  }

  private reverts(cluster: Cluster, d: Decision): void {
    const log = this.log;
    // A revert begins: this write recorded it (the guarded write is its lock: a second copy
    // deciding the same meets a 409, decides again and finds it recorded).
    const r = d.revertStarted;
    if (r !== undefined) {
      const gate = r.gate === undefined ? "" : `, gate ${r.gate}`;
      const msg = `reverting ${r.from.version} to ${r.to.version} (${recordReasonOf(r)}${gate}): ${r.message}; ${r.from.version} is revoked for this Cluster`;
      const what = { cluster: cluster.metadata.name, from: r.from.version, to: r.to.version };
      log.warn({ ...what, reason: recordReasonOf(r), gate: r.gate }, msg);
      this.event(cluster, "Warning", "Reverted", msg);
    }
    // The same revert sent elsewhere (its target recalled or revoked since): its own Event; it
    // is not a second revert (liken_operator_reverts_total counted it when it began).
    const t = d.revertRetargeted;
    if (t !== undefined) {
      const r = t.revert;
      const msg = `the revert of ${r.from.version} is retargeted from ${t.was.version} to ${r.to.version}: ${t.why}; ${r.to.version} is the newest proven release neither recalled nor revoked`;
      const what = { cluster: cluster.metadata.name, from: r.from.version, to: r.to.version };
      log.warn({ ...what, was: t.was.version }, msg);
      this.event(cluster, "Warning", "RevertRetargeted", msg);
    }
  }

  /** Rollout brakes (brake.ts, windows.ts): one Event when one begins to hold. */
  private held(cluster: Cluster, d: Decision): void {
    if (d.held === undefined) return;
    // A failed or revoked release is a warning; a window, a canary, a pause or a first
    // trial is the plan.
    const failed = d.held.reason === "ReleaseFailed" || d.held.reason === "ReleaseRevoked";
    const what = { cluster: cluster.metadata.name, reason: d.held.reason };
    if (failed) this.log.warn(what, d.held.message);
    else this.log.info(what, d.held.message);
    this.event(cluster, failed ? "Warning" : "Normal", d.held.reason, d.held.message);
  }
}
