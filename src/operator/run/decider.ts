// One decision of a Cluster, from what this copy observes: decide() (pure, decide/decide.ts)
// given the cached Machines, the heartbeats, the serving Nodes' addresses, the release floors,
// the Prometheus checks, the channel view and the start-up grace, timed for the stats and the
// metrics. When a release needs a Machine view as new as the Cluster and the cache is older,
// the Machines are read from the API server and decided on again (freshness.ts). The reads a
// decision asks for (a floor, a Prometheus check) start here and schedule the next pass.
import { performance } from "node:perf_hooks";
import type { Cluster, LikenApi, Machine } from "../../api/index.js";
import { FloorCache } from "../channel/floor.js";
import { decide, type ChannelView, type Decision, type DecideSettings } from "../decide/decide.js";
import type { Logger } from "../logger.js";
import type { NodeAddresses } from "../peers/address.js";
import { servingNodes } from "../peers/sources-status.js";
import { provingNodes } from "../status/evidence.js";
import { QueryChecks } from "../revert/prom-check.js";
import type { HeartbeatTracker } from "./heartbeats.js";
import type { Clocks } from "./liveness.js";
import type { OperatorMetrics } from "./metrics.js";
import type { OperatorStats, Timings } from "./stats.js";

/** Machines and the resourceVersion they are as of. */
interface MachineView {
  machines: readonly Machine[];
  version: string;
}

export interface DeciderParts {
  api: LikenApi;
  /** The watched Machines of a Cluster (machine-index.ts). */
  machinesOf: (cluster: string) => readonly Machine[];
  /** The resourceVersion the Machine watch's cache is as of. */
  cacheVersion: () => string;
  heartbeats: HeartbeatTracker;
  nodeAddresses: NodeAddresses;
  clocks: Clocks;
  /** Whether this copy was paused (liveness.ts): its view is stale, decide nothing. */
  paused: () => boolean;
  log: Logger;
  stats: OperatorStats;
  timings: Timings;
  metrics: OperatorMetrics;
  /** Decide this Cluster again (a read a decision asked for ended). */
  schedule: (cluster: string) => void;
}

export class Decider {
  /** When this copy's view starts: it started, woke from a pause, or its clock stepped back. */
  private startedAt = new Date();
  /** Release floors (release.yaml revertFloor) read for a revert (revert.ts, floor.ts). */
  private readonly floors = new FloorCache();
  /** spec.rollout.revert.prometheus's checks, run on their interval (prom-check.ts). */
  private readonly queries = new QueryChecks();

  constructor(
    readonly settings: DecideSettings,
    private readonly parts: DeciderParts,
  ) {}

  /** The start-up grace counts from `at`: no grant until it has passed (decide.ts). */
  restartGrace(at: Date): void {
    this.startedAt = at;
  }

  graceEnds(): Date {
    return new Date(this.startedAt.getTime() + this.settings.startGraceSeconds * 1000);
  }

  /** The Cluster was deleted. */
  forget(name: string): void {
    this.queries.forget(name);
  }

  /**
   * decide() on the Cluster and the cached Machines; when a release needs a Machine view as
   * new as the Cluster and the cache is older, again on the Machines read from the API server
   * (freshness.ts). Undefined: this copy was paused meanwhile (decide nothing).
   */
  async decideFresh(
    cluster: Cluster,
    channel: ChannelView | undefined,
  ): Promise<Decision | undefined> {
    const cached = {
      machines: this.parts.machinesOf(cluster.metadata.name),
      version: this.parts.cacheVersion(),
    };
    const d = this.decideOn(cluster, cached, channel);
    if (!d.needsFreshMachines) return d;
    const fresh = await this.readMachines(cluster);
    if (this.parts.paused()) return undefined;
    return this.decideOn(cluster, fresh, channel);
  }

  /** A revert waits for the floor of the release it leaves (floor.ts); the Prometheus check runs (prom-check.ts). */
  readForRevert(cluster: Cluster, d: Decision): void {
    const { clocks, schedule } = this.parts;
    const name = cluster.metadata.name;
    if (d.floorWanted !== undefined) {
      this.floors.want(cluster, d.floorWanted, () => schedule(name));
    }
    const q = d.queryWanted;
    if (q !== undefined) {
      this.queries.maybe(
        name,
        q.release,
        q.check,
        clocks.mono(),
        () => schedule(name),
        clocks.wall(),
      );
    }
  }

  private decideOn(
    cluster: Cluster,
    view: MachineView,
    channel: ChannelView | undefined,
  ): Decision {
    const { clocks, timings } = this.parts;
    const t0 = performance.now();
    const cpu0 = process.cpuUsage();
    const d = decide(
      {
        cluster,
        machines: view.machines,
        machinesVersion: view.version,
        nodeAddresses: this.parts.nodeAddresses.of(servingNodes(cluster, view.machines)),
        nodeBoots: this.parts.nodeAddresses.boots(
          provingNodes(view.machines, cluster.status?.evidence),
        ),
        heartbeats: this.parts.heartbeats.view(),
        now: new Date(clocks.wall()),
        mono: clocks.mono(),
        startedAt: this.startedAt,
        floors: this.floors.view(),
        queryChecks: this.queries.view(cluster.metadata.name),
        ...(channel === undefined ? {} : { channel }),
      },
      this.settings,
    );
    const ms = performance.now() - t0;
    const cpu = process.cpuUsage(cpu0);
    timings.decide.add(ms);
    timings.decideCpu.add((cpu.user + cpu.system) / 1000);
    this.parts.metrics.decideTook(cluster.metadata.name, ms);
    return d;
  }

  /**
   * The Machines of a Cluster read from the API server (a quorum list: as new as anything this
   * copy read before), for a release the cached view is too old to decide.
   */
  private async readMachines(cluster: Cluster): Promise<MachineView> {
    const name = cluster.metadata.name;
    this.parts.stats.reads++;
    const list = await this.parts.api.machines.list();
    this.parts.log.info(
      {
        cluster: name,
        clusterVersion: cluster.metadata.resourceVersion,
        cacheVersion: this.parts.cacheVersion(),
        listVersion: list.resourceVersion,
      },
      "a turn would be released on a Machine cache older than the Cluster: read the Machines again",
    );
    const machines = list.items.filter((m) => m.spec.cluster === name);
    return { machines, version: list.resourceVersion };
  }
}
