// An independent observer of a rollout: it watches the API objects (never the agents' or
// the operator's logs) and keeps the figures the demo's summary line and the fleet tests
// check: the most turns in flight and the most leaders down at any instant.
import { LikenApi } from "../api/client.js";
import type { Cluster, Machine } from "../api/types.js";
import { ResourceWatcher } from "../api/watch.js";
import { sampleOf, type TimelineSample } from "../cli/views/timeline.js";

export interface Instant {
  turnsInFlight: number;
  /** Leaders that hold a turn or are Lost: each is a datastore member that may be down. */
  leadersDown: number;
  /** Machines that hold a turn or are Lost: what the budget bounds. */
  unavailable: number;
}

/** The figures of one instant, from the Cluster and its Machines as the API shows them. */
export function measure(cluster: Cluster | undefined, machines: Machine[]): Instant {
  const name = cluster?.metadata.name;
  const mine = machines.filter((m) => m.spec.cluster === name);
  const turns = new Set((cluster?.status?.rebootTurns ?? []).map((t) => t.machine));
  const down = mine.filter((m) => turns.has(m.metadata.name) || m.status?.step === "Lost");
  const leaderTurns = (cluster?.status?.rebootTurns ?? [])
    .filter((t) => t.leader)
    .map((t) => t.machine);
  const leaders = new Set([
    ...leaderTurns,
    ...down.filter((m) => m.spec.role === "Leader").map((m) => m.metadata.name),
  ]);
  return { turnsInFlight: turns.size, leadersDown: leaders.size, unavailable: down.length };
}

export interface VersionChange {
  machine: string;
  from: string | undefined;
  to: string | undefined;
  at: number;
}

export class RolloutObserver {
  maxTurns = 0;
  maxLeadersDown = 0;
  maxUnavailable = 0;
  readonly changes: VersionChange[] = [];
  /**
   * The most bytes each machine's status showed received from the channel (download
   * progress: bytesFetched, else bytesDone) while this observer watched; absent: none shown.
   */
  readonly downloaded = new Map<string, number>();
  /** The fleet at every change seen: the demo draws its timeline from these. */
  readonly samples: TimelineSample[] = [];
  private cluster: Cluster | undefined;
  private readonly machines = new Map<string, Machine>();
  private readonly clusterWatch: ResourceWatcher<Cluster>;
  private readonly machineWatch: ResourceWatcher<Machine>;

  constructor(
    api: LikenApi,
    private readonly clusterName: string,
  ) {
    this.clusterWatch = new ResourceWatcher(api.clusters, {
      onSync: (all) => this.setCluster(all.find((c) => c.metadata.name === clusterName)),
      onChange: (e) => {
        if (e.object.metadata.name === clusterName)
          this.setCluster(e.type === "deleted" ? undefined : e.object);
      },
    });
    this.machineWatch = new ResourceWatcher(api.machines, {
      onSync: (all) => {
        for (const m of all) this.setMachine(m);
        this.record();
      },
      onChange: (e) => {
        if (e.type === "deleted") this.machines.delete(e.object.metadata.name);
        else this.setMachine(e.object);
        this.record();
      },
    });
  }

  async start(): Promise<void> {
    await Promise.all([this.clusterWatch.start(), this.machineWatch.start()]);
  }

  stop(): void {
    this.clusterWatch.stop();
    this.machineWatch.stop();
  }

  current(): { cluster: Cluster | undefined; machines: Machine[] } {
    return { cluster: this.cluster, machines: [...this.machines.values()] };
  }

  private setCluster(c: Cluster | undefined): void {
    this.cluster = c;
    this.record();
  }

  private setMachine(m: Machine): void {
    if (m.spec.cluster !== this.clusterName) return;
    const before = this.machines.get(m.metadata.name);
    if (before?.status?.version !== m.status?.version && before !== undefined) {
      this.changes.push({
        machine: m.metadata.name,
        from: before.status?.version,
        to: m.status?.version,
        at: Date.now(),
      });
    }
    this.machines.set(m.metadata.name, m);
    const p = m.status?.progress;
    if (p !== undefined) {
      const bytes = p.bytesFetched ?? p.bytesDone;
      const seen = this.downloaded.get(m.metadata.name) ?? 0;
      this.downloaded.set(m.metadata.name, Math.max(seen, bytes));
    }
  }

  private record(): void {
    this.samples.push(sampleOf(this.cluster, [...this.machines.values()], Date.now()));
    const i = measure(this.cluster, [...this.machines.values()]);
    this.maxTurns = Math.max(this.maxTurns, i.turnsInFlight);
    this.maxLeadersDown = Math.max(this.maxLeadersDown, i.leadersDown);
    this.maxUnavailable = Math.max(this.maxUnavailable, i.unavailable);
  }
}
