// Heartbeats as the operator sees them: it watches the agents' Leases in liken-heartbeats
// and notes, on its own monotonic clock, when it saw each one renewed (see HeartbeatView in
// machine-view.ts for why its own clock). A Lease it finds at start (or after waking from
// a pause) is a baseline, not a renewal: the machine behind it may have died long ago.
import {
  CoordinationV1Api,
  makeInformer,
  type Informer,
  type KubeConfig,
  type ObjectCache,
  type V1Lease,
} from "@kubernetes/client-node";
import { performance } from "node:perf_hooks";
import { HEARTBEAT_NAMESPACE, LABEL_MACHINE } from "../api/index.js";
import type { HeartbeatView } from "./machine-view.js";

/** The bookkeeping, without I/O (unit-tested). */
export class HeartbeatTracker {
  private readonly renewTime = new Map<string, string>();
  /** performance.now() readings (machine-view.ts says why not the wall clock). */
  private readonly renewedAt = new Map<string, number>();
  private since: number;

  constructor(since: number) {
    this.since = since;
  }

  /**
   * A Lease as listed or watched. `baseline`: seen while (re)listing at start or after a
   * wake-up, so a renewTime that is new to this copy is not evidence of life.
   * Returns true when this is a renewal (the machine is alive now).
   */
  observe(machine: string, renewTime: string | undefined, now: number, baseline: boolean): boolean {
    const before = this.renewTime.get(machine);
    if (renewTime === undefined) return false;
    this.renewTime.set(machine, renewTime);
    if (before === renewTime) return false;
    if (before === undefined && baseline) return false;
    this.renewedAt.set(machine, now);
    return true;
  }

  forget(machine: string): void {
    this.renewTime.delete(machine);
    this.renewedAt.delete(machine);
  }

  /** After a pause: what this copy saw before is stale; judge everyone from `now` again. */
  rebaseline(now: number): void {
    this.since = now;
    this.renewedAt.clear();
  }

  view(): HeartbeatView {
    return { renewedAt: this.renewedAt, since: this.since };
  }
}

export interface LeaseWatch {
  start(): Promise<void>;
  stop(): Promise<void>;
}

/**
 * Watches the heartbeat Leases and feeds the tracker. `onRenewal` hears of every renewal
 * (the operator wakes a Lost machine's cluster with it).
 */
export function watchHeartbeats(
  kc: KubeConfig,
  tracker: HeartbeatTracker,
  onRenewal: (machine: string) => void,
  onError: (e: unknown) => void,
  mono: () => number = () => performance.now(),
): LeaseWatch {
  const api = kc.makeApiClient(CoordinationV1Api);
  const informer: Informer<V1Lease> & ObjectCache<V1Lease> = makeInformer(
    kc,
    `/apis/coordination.k8s.io/v1/namespaces/${HEARTBEAT_NAMESPACE}/leases`,
    () => api.listNamespacedLease({ namespace: HEARTBEAT_NAMESPACE }),
  );
  let baseline = true;
  let stopped = false;
  let retry: NodeJS.Timeout | undefined;
  const seen = (l: V1Lease): void => {
    const machine = l.metadata?.labels?.[LABEL_MACHINE] ?? l.metadata?.name;
    if (machine === undefined) return;
    const renew = l.spec?.renewTime;
    const text = renew === undefined ? undefined : new Date(renew).toISOString();
    if (tracker.observe(machine, text, mono(), baseline)) onRenewal(machine);
  };
  informer.on("add", seen);
  informer.on("update", seen);
  informer.on("delete", (l) => {
    const machine = l.metadata?.labels?.[LABEL_MACHINE] ?? l.metadata?.name;
    if (machine !== undefined) tracker.forget(machine);
  });
  // client-node's informer stops on any error but 410: start it again after a pause.
  informer.on("error", (e: unknown) => {
    onError(e);
    if (stopped) return;
    clearTimeout(retry);
    retry = setTimeout(() => {
      if (!stopped) informer.start().catch(onError);
    }, 1000);
    retry.unref();
  });
  return {
    async start() {
      stopped = false;
      baseline = true;
      await informer.start();
      baseline = false;
    },
    async stop() {
      stopped = true;
      clearTimeout(retry);
      await informer.stop();
    },
  };
}
