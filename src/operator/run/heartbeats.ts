// Heartbeats as the operator sees them: it watches the agents' Leases in liken-heartbeats
// and notes, on its own monotonic clock, when it saw each one renewed (see HeartbeatView in
// machine-view.ts for why its own clock). A Lease it finds at start (or after waking from
// a pause) is a baseline, not a renewal: the machine behind it may have died long ago.
import { CoordinationV1Api, Watch, type KubeConfig } from "@kubernetes/client-node";
import { performance } from "node:perf_hooks";
import { HEARTBEAT_NAMESPACE, LABEL_MACHINE, ResourceWatcher } from "../../api/index.js";
import type { WatchSource } from "../../api/watch.js";
import type { HeartbeatView } from "../view/machine-view.js";
import { trimLease, type HeartbeatLease } from "./trim.js";

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

const LEASES = `/apis/coordination.k8s.io/v1/namespaces/${HEARTBEAT_NAMESPACE}/leases`;

/** The heartbeat Leases as a watch source: listed with client-node, watched as raw JSON. */
function leaseSource(kc: KubeConfig): WatchSource<HeartbeatLease> {
  const api = kc.makeApiClient(CoordinationV1Api);
  return {
    kind: "Lease",
    async list(opts) {
      const list = await api.listNamespacedLease({ namespace: HEARTBEAT_NAMESPACE, ...opts });
      return {
        items: list.items.map(trimLease),
        resourceVersion: list.metadata?.resourceVersion ?? "",
      };
    },
    watch(query, onEvent, onDone) {
      return new Watch(kc).watch(LEASES, { ...query }, onEvent, onDone);
    },
  };
}

/**
 * Watches the heartbeat Leases and feeds the tracker. `onRenewal` hears of every renewal
 * (the operator wakes a Lost machine's cluster with it). The watch keeps of each Lease only
 * what is read here (trim.ts): at 5,000 machines, whole Leases were megabytes of heap held
 * for three fields. The watcher lists again by itself after any failure (watch.ts).
 */
export function watchHeartbeats(
  kc: KubeConfig,
  tracker: HeartbeatTracker,
  onRenewal: (machine: string) => void,
  onError: (e: unknown) => void,
  mono: () => number = () => performance.now(),
): LeaseWatch {
  let baseline = true;
  const machineOf = (l: HeartbeatLease): string =>
    l.metadata.labels?.[LABEL_MACHINE] ?? l.metadata.name;
  const seen = (l: HeartbeatLease): void => {
    const renew = l.spec?.renewTime;
    const text = renew === undefined ? undefined : new Date(renew).toISOString();
    const machine = machineOf(l);
    if (tracker.observe(machine, text, mono(), baseline)) onRenewal(machine);
  };
  const watcher = new ResourceWatcher<HeartbeatLease>(
    leaseSource(kc),
    {
      onChange: (ev) => {
        if (ev.type === "deleted") tracker.forget(machineOf(ev.object));
        else seen(ev.object);
      },
      onError,
    },
    { trim: trimLease },
  );
  return {
    async start() {
      baseline = true;
      await watcher.start();
      baseline = false;
    },
    stop() {
      watcher.stop();
      return Promise.resolve();
    },
  };
}
