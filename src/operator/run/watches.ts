// What this copy observes, kept current by watches: the Clusters, the Machines (indexed by
// Cluster: a pass's view), the agents' heartbeat Leases, and the addresses of the Nodes whose
// machines serve peers. Each change names the Clusters it concerns, to be passed over; nothing
// here decides. The objects are kept trimmed (trim.ts): at 5,000 Machines these caches are
// most of the operator's heap.
import type { KubeConfig } from "@kubernetes/client-node";
import { ResourceWatcher, type Cluster, type LikenApi, type Machine } from "../../api/index.js";
import { NodeAddresses } from "../peers/address.js";
import { HeartbeatTracker, watchHeartbeats, type LeaseWatch } from "./heartbeats.js";
import type { Clocks } from "./liveness.js";
import { MachineIndex } from "./machine-index.js";
import { trimObject } from "./trim.js";

export interface WatchCallbacks {
  /** An event for this Cluster (its deletion, or any other change). */
  cluster: (name: string, deleted: boolean) => void;
  /** Pass over this Cluster. */
  schedule: (cluster: string) => void;
  /** The error handler of one watch (or read), named by what it does. */
  onError: (what: string) => (e: unknown) => void;
}

export class Watches {
  readonly clusters: ResourceWatcher<Cluster>;
  readonly machines: ResourceWatcher<Machine>;
  /** The watched Machines by Cluster (machine-index.ts): a pass's view, copied only on change. */
  readonly byCluster = new MachineIndex();
  readonly heartbeats: HeartbeatTracker;
  /** The addresses of the Nodes whose machines serve peers (peers/address.ts). */
  readonly nodeAddresses: NodeAddresses;
  private readonly leases: LeaseWatch;

  constructor(kc: KubeConfig, api: LikenApi, clocks: Clocks, on: WatchCallbacks) {
    const { schedule, onError } = on;
    this.clusters = new ResourceWatcher(
      api.clusters,
      {
        onChange: (ev) => on.cluster(ev.object.metadata.name, ev.type === "deleted"),
        onError: onError("watching Clusters"),
      },
      { trim: trimObject },
    );
    this.machines = new ResourceWatcher(
      api.machines,
      {
        onChange: (ev) => {
          // The Cluster it left (spec.cluster edited) is passed over too: its budget changed.
          const before = this.byCluster.clusterOfName(ev.object.metadata.name);
          if (ev.type === "deleted") this.byCluster.delete(ev.object);
          else this.byCluster.set(ev.object);
          if (before !== undefined && before !== ev.object.spec.cluster) schedule(before);
          schedule(ev.object.spec.cluster);
        },
        onSync: (machines) => this.byCluster.sync(machines),
        onError: onError("watching Machines"),
      },
      { trim: trimObject },
    );
    this.heartbeats = new HeartbeatTracker(clocks.mono());
    this.leases = watchHeartbeats(
      kc,
      this.heartbeats,
      (machine) => {
        const m = this.machines.get(machine);
        if (m?.status?.step === "Lost") schedule(m.spec.cluster);
      },
      onError("watching heartbeat Leases"),
      clocks.mono,
    );
    this.nodeAddresses = new NodeAddresses(
      kc,
      () => {
        for (const c of this.clusters.list()) schedule(c.metadata.name);
      },
      onError("reading a Node's addresses"),
    );
  }

  /** Resolves once the first lists are in: the Machines and Leases first, then the Clusters. */
  async start(): Promise<void> {
    await Promise.all([this.machines.start(), this.leases.start()]);
    await this.clusters.start();
  }

  /** Lists the Clusters and Machines again, their caches stale (a pause: liveness.ts). */
  relist(): void {
    this.machines.stop();
    this.clusters.stop();
    void this.machines.start();
    void this.clusters.start();
  }

  async stop(): Promise<void> {
    this.nodeAddresses.stop();
    this.clusters.stop();
    this.machines.stop();
    await this.leases.stop();
  }
}
