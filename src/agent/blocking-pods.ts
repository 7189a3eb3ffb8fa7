// Pods that hold a machine's turn (Cluster spec.disruption.blockingPods, kured's
// blocking-pod selector): while a pod that matches one entry runs on this node (a backup, a
// batch job that must not be interrupted), the agent asks for no turn and gives back a turn it
// has not begun; its status names the pods (status.blockingPods, the DETAIL of `liken status`).
//
// Looked at only while the machine is staged for the target and has not begun its drain, and
// at most every LOOK_EVERY_MS: each waiting machine lists its own node's pods (a field selector
// on spec.nodeName, served from the API server's watch cache), so a fleet of 5,000 waiting
// machines costs the server about 170 small lists a second. A list that fails holds the turn
// too, and says why: a blocking pod that cannot be seen is not known to be gone.
import type { Logger } from "pino";
import type { Rest } from "../api/rest.js";
import type { BlockingPods as BlockingPodsSpec, Cluster } from "../api/types.js";
import { errorText } from "../errors.js";
import { selectorText, type PodView } from "./health.js";

/** How often a waiting machine lists its node's pods again. */
export const LOOK_EVERY_MS = 30_000;
/** The pods a status names, at most (the CRD's bound). */
export const BLOCKING_PODS_MAX = 8;

/** What holds the turn: the pods ("ns/name"), and the words the status says. */
export interface Blocking {
  pods: string[];
  why: string;
}

export class BlockingPods {
  private last: { at: number; key: string; blocking: Blocking | undefined } | undefined;

  constructor(
    private readonly p: { rest: Rest; nodeName: string; log: Logger; now: () => number },
  ) {}

  /** Undefined: nothing holds the turn (no entry, no matching pod, or not looked at now). */
  async look(cluster: Cluster | undefined, waiting: boolean): Promise<Blocking | undefined> {
    const spec = specOf(cluster);
    if (spec.length === 0 || !waiting) {
      this.last = undefined;
      return undefined;
    }
    const key = JSON.stringify(spec);
    const now = this.p.now();
    const last = this.last;
    if (last?.key === key && now - last.at < LOOK_EVERY_MS) return last.blocking;
    const blocking = await this.list(spec);
    this.said(blocking, last?.blocking);
    this.last = { at: now, key, blocking };
    return blocking;
  }

  /** A log line when what holds the turn changes (not every look). */
  private said(now: Blocking | undefined, before: Blocking | undefined): void {
    if (now?.why === before?.why) return;
    if (now === undefined) this.p.log.info("no pod holds the turn now");
    else this.p.log.info({ pods: now.pods }, now.why);
  }

  private async list(spec: readonly BlockingPodsSpec[]): Promise<Blocking | undefined> {
    const found: string[] = [];
    for (const b of spec) {
      const path =
        b.namespace === undefined
          ? "/api/v1/pods"
          : `/api/v1/namespaces/${encodeURIComponent(b.namespace)}/pods`;
      try {
        const list = await this.p.rest.request<{ items: PodView[] }>("GET", path, {
          query: {
            labelSelector: selectorText(b.selector),
            fieldSelector: `spec.nodeName=${this.p.nodeName}`,
          },
          op: { verb: "list", kind: "Pod" },
        });
        found.push(...list.items.filter(running).map(nameOf));
      } catch (e) {
        const where = b.namespace === undefined ? "" : ` in namespace ${b.namespace}`;
        return {
          pods: found.slice(0, BLOCKING_PODS_MAX),
          why: `no turn asked: cannot list the pods of spec.disruption.blockingPods${where} (${selectorText(b.selector)}): ${errorText(e)}`,
        };
      }
    }
    if (found.length === 0) return undefined;
    const shown = found.slice(0, BLOCKING_PODS_MAX);
    const more = found.length > shown.length ? ` and ${found.length - shown.length} more` : "";
    return {
      pods: shown,
      why: `no turn asked while ${shown.join(", ")}${more} run${found.length === 1 ? "s" : ""} on this node (spec.disruption.blockingPods)`,
    };
  }
}

const specOf = (c: Cluster | undefined): readonly BlockingPodsSpec[] =>
  c?.spec.disruption?.blockingPods ?? [];

/** A pod that still runs: not finished, not being deleted. */
function running(p: PodView): boolean {
  const phase = p.status?.phase;
  return p.metadata.deletionTimestamp === undefined && phase !== "Succeeded" && phase !== "Failed";
}

const nameOf = (p: PodView): string => `${p.metadata.namespace ?? ""}/${p.metadata.name}`;
