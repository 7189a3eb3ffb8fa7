// Lost marks: a silent machine marked Lost (or back) in its Machine status, as decide() said,
// each write conditioned on the resourceVersion it was decided on and announced with its Event
// once written. The writes in flight are bounded (MAX_MARKS_IN_FLIGHT, below says why); the
// marks a pass leaves out are decided again by the pass the last write in flight schedules.
import {
  isConflict,
  isNotFound,
  type Cluster,
  type LikenApi,
  type Machine,
  type MachineCondition,
} from "../../api/index.js";
import { rfc3339 } from "../../api/time.js";
import type { AliveReason, LostMark } from "../decide/decide.js";
import type { EventReason } from "../events.js";
import type { Logger } from "../logger.js";
import { setCondition } from "../view/conditions.js";
import type { Announcer } from "./announce.js";
import type { Clocks } from "./liveness.js";
import type { OperatorStats } from "./stats.js";

/** Lost marks (Machine status writes, each with its Event) in flight at once, at most. */
export const MAX_MARKS_IN_FLIGHT = 16;

/** The Event each Alive mark is announced with. */
const LOST_MARK_EVENTS: Record<AliveReason, { event: EventReason; type: "Normal" | "Warning" }> = {
  NoHeartbeat: { event: "MachineLost", type: "Warning" },
  HeartbeatUnseen: { event: "HeartbeatUnseen", type: "Warning" },
  HeartbeatReturned: { event: "MachineBack", type: "Normal" },
};

export interface LostMarksParts {
  api: LikenApi;
  fieldManager: string;
  /** The watched Machine of a name: the marks are written from the cache. */
  machine: (name: string) => Machine | undefined;
  /** This copy's clocks: the condition's time is its wall clock's. */
  clocks: Clocks;
  log: Logger;
  stats: OperatorStats;
  announcer: Announcer;
  /** Decide this Cluster again (the marks left out). */
  schedule: (cluster: string) => void;
}

export class LostMarks {
  private readonly marking = new Set<string>();
  /** Lost marks a pass decided but left for later (MAX_MARKS_IN_FLIGHT). */
  private marksLeft = false;

  constructor(private readonly parts: LostMarksParts) {}

  /**
   * Marks a silent machine Lost (or back), each write conditioned on what was decided on. At
   * most MAX_MARKS_IN_FLIGHT at once: when thousands of machines go silent together (a
   * partition; a starved heartbeat sender) a write each at once opened as many TLS connections
   * with their Events, which took most of the operator's CPU. The marks left out are decided
   * again by the pass the last write in flight schedules.
   */
  write(cluster: Cluster, marks: readonly LostMark[]): void {
    for (const mark of marks) {
      if (this.marking.has(mark.machine)) continue;
      if (this.marking.size >= MAX_MARKS_IN_FLIGHT) {
        this.marksLeft = true;
        break;
      }
      const m = this.parts.machine(mark.machine);
      if (m === undefined || mark.resourceVersion === undefined) continue;
      // The conditions below come from the cache: only when it holds the very Machine the mark
      // was decided on (a decision on a fresh list may be newer); the next pass marks otherwise.
      if (m.metadata.resourceVersion !== mark.resourceVersion) continue;
      this.marking.add(mark.machine);
      this.writeOne(cluster, m, mark, mark.resourceVersion);
      const stats = this.parts.stats;
      stats.marksInFlightPeak = Math.max(stats.marksInFlightPeak, this.marking.size);
    }
  }

  private writeOne(cluster: Cluster, m: Machine, mark: LostMark, resourceVersion: string): void {
    const { api, fieldManager, log } = this.parts;
    const now = rfc3339(new Date(this.parts.clocks.wall()));
    const conditions = setCondition<MachineCondition>(
      m.status?.conditions,
      {
        type: "Alive",
        status: mark.lost ? "False" : "True",
        reason: mark.reason,
        message: mark.message,
      },
      now,
    );
    const step = mark.step === undefined ? {} : { step: mark.step };
    api.machines
      .patchStatus(
        mark.machine,
        { status: { ...step, conditions } },
        { resourceVersion, fieldManager },
      )
      .then(
        () => this.written(cluster, mark),
        (e: unknown) => {
          // A conflict means the agent (or another copy) wrote first: decide again.
          if (!isConflict(e) && !isNotFound(e)) {
            log.warn({ machine: mark.machine, err: String(e) }, "Lost mark failed");
          }
        },
      )
      .finally(() => {
        this.marking.delete(mark.machine);
        if (this.marking.size === 0 && this.marksLeft) {
          this.marksLeft = false;
          this.parts.schedule(cluster.metadata.name);
        }
      });
  }

  private written(cluster: Cluster, mark: LostMark): void {
    this.parts.stats.machineWrites++;
    const { event, type } = LOST_MARK_EVENTS[mark.reason];
    const msg = `Machine ${mark.machine}: ${mark.message}`;
    const fields = {
      cluster: cluster.metadata.name,
      machine: mark.machine,
      reason: mark.reason,
    };
    if (type === "Warning") this.parts.log.warn(fields, msg);
    else this.parts.log.info(fields, msg);
    this.parts.announcer.event(cluster, type, event, msg);
  }
}
