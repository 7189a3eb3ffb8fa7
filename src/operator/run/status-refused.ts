// A Cluster status write the API server refused as Invalid (422), and its backoff: a decision
// whose status the server will not take must not be sent again every second, and a person must
// see why nothing moves (an Event, the condition StatusWriteRefused). An accepted write ends the
// refusal: its condition is left out of the next status (statusToWrite) and the backoff starts
// over. Also the fields a maker cut to their bounds (bounds.ts), said with the write they shaped.
import {
  isInvalid,
  isNotFound,
  type Cluster,
  type ClusterCondition,
  type LikenApi,
} from "../../api/index.js";
import type { ApiError } from "../../api/errors.js";
import { RefusalBackoff, refusalCondition, withoutRefusal } from "../../api/status-refusal.js";
import { rfc3339 } from "../../api/time.js";
import type { Decision } from "../decide/decide.js";
import type { Logger } from "../logger.js";
import { setCondition } from "../view/conditions.js";
import type { Announcer } from "./announce.js";
import type { OperatorStats } from "./stats.js";

export interface StatusRefusalsParts {
  api: LikenApi;
  fieldManager: string;
  log: Logger;
  stats: OperatorStats;
  announcer: Announcer;
  /** Decide this Cluster again (the backoff ended). */
  schedule: (cluster: string) => void;
}

export class StatusRefusals {
  /** Clusters whose last status write was refused (422): no same write before the backoff. */
  private readonly refusals = new RefusalBackoff();

  constructor(private readonly parts: StatusRefusalsParts) {}

  /** Whether a pass over this Cluster waits: its write was refused, the spec is unchanged. */
  holds(cluster: Cluster): boolean {
    return this.refusals.holds(cluster.metadata.name, generationOf(cluster), Date.now());
  }

  /** A write was accepted: the next refusal starts from the first wait again. */
  accepted(name: string): void {
    this.refusals.clear(name);
  }

  /** A write that no retry now can help: the Cluster is gone (404) or refused it (422). */
  writeEnded(cluster: Cluster, e: unknown, cut: readonly string[]): boolean {
    if (isNotFound(e)) return true;
    if (!isInvalid(e)) return false;
    this.statusRefused(cluster, e, cut);
    return true;
  }

  /** A maker missed a bound (bounds.ts): the field was cut to fit, and that is a bug. */
  noteCut(cluster: string, cut: readonly string[]): void {
    if (cut.length > 0) {
      this.parts.log.warn({ cluster, fields: cut }, "status fields cut to their bounds");
    }
  }

  /**
   * The API server refused the status as Invalid (422): nothing of this decision was recorded
   * (no grant, no release, no stall). Say so where a person looks (an Event, the condition
   * StatusWriteRefused written alone on the Cluster as the server has it) and write again only
   * after a backoff (status-refusal.ts), not every second.
   */
  private statusRefused(cluster: Cluster, e: ApiError, cut: readonly string[]): void {
    const { log, schedule } = this.parts;
    const name = cluster.metadata.name;
    const delay = this.refusals.refused(name, generationOf(cluster), Date.now());
    setTimeout(() => schedule(name), delay).unref();
    this.parts.stats.refusals++;
    const cond = refusalCondition("Cluster", name, e, delay);
    log.error({ cluster: name, code: e.code, retryMs: delay, cut, causes: e.causes }, cond.message);
    this.parts.announcer.event(cluster, "Warning", "StatusWriteRefused", cond.message);
    const conditions = setCondition<ClusterCondition>(
      cluster.status?.conditions,
      cond,
      rfc3339(new Date()),
    );
    this.parts.api.clusters
      .patchStatus(
        name,
        { status: { conditions } },
        {
          ...(cluster.metadata.resourceVersion === undefined
            ? {}
            : { resourceVersion: cluster.metadata.resourceVersion }),
          fieldManager: this.parts.fieldManager,
        },
      )
      .catch((err: unknown) => {
        // A conflict: the Cluster moved on; the next attempt decides (and says) again.
        log.warn({ cluster: name, err: String(err) }, "StatusWriteRefused not written");
      });
  }
}

/**
 * The status to write: the decision's, without StatusWriteRefused (a write accepted ends the
 * refusal), and whether to write it (a change, or a refusal condition to take away).
 */
export function statusToWrite(d: Decision): { status: Cluster["status"]; needed: boolean } {
  const conditions = withoutRefusal(d.status.conditions);
  if (conditions === d.status.conditions) return { status: d.status, needed: d.changed };
  return {
    status: { ...d.status, ...(conditions === undefined ? {} : { conditions }) },
    needed: true,
  };
}

/** What a Cluster status is decided from, as far as a refusal goes: the spec's generation. */
function generationOf(c: Cluster): string {
  return String(c.metadata.generation ?? "");
}
