// cluster-operator's wiring: watches (Clusters, Machines, heartbeat Leases), a serial
// reconcile per Cluster, the guarded writes, Events. Every decision is decide()'s; this
// file only observes, writes what was decided, and says what happened.
//
//   watch events / 1 s tick ──► dirty clusters ──► reconcile(cluster)
//        decide(observed) ──► Lost marks (Machine status, conditioned on its resourceVersion)
//                         ──► Cluster status (conditioned on its resourceVersion)
//                               409 ─► GET the Cluster, decide again, write again
//                               ok  ─► Events for grants, releases, stalls
import { performance } from "node:perf_hooks";
import { getHeapStatistics } from "node:v8";
import { KubeConfig } from "@kubernetes/client-node";
import {
  LikenApi,
  ResourceWatcher,
  isConflict,
  isInvalid,
  isNotFound,
  reuseConnections,
  type Cluster,
  type ClusterCondition,
  type Machine,
  type MachineCondition,
} from "../../api/index.js";
import { trustModeOf } from "../../target/view.js";
import {
  pollDue,
  readChannel,
  DEFAULT_CHANNEL_INTERVAL_MS,
  type PollState,
} from "../channel/poll.js";
import { readTrust } from "../channel/trust.js";
import { setCondition } from "../view/conditions.js";
import {
  DEFAULT_SETTINGS,
  decide,
  type ChannelView,
  type Decision,
  type AliveReason,
  type DecideSettings,
  type LostMark,
} from "../decide.js";
import { LeaseElector } from "./election.js";
import { PassScheduler } from "./passes.js";
import { MachineIndex } from "./machine-index.js";
import { Samples, round2 } from "./samples.js";
import { trimObject } from "./trim.js";
import { FloorCache } from "../channel/floor.js";
import { QueryChecks } from "../revert/prom-check.js";
import { recordReasonOf } from "../revert/revert.js";
import type { BeforeTurnWrite } from "./hold.js";
import { KubeEvents, type EventReason, type EventSink } from "../events.js";
import { HeartbeatTracker, watchHeartbeats, type LeaseWatch } from "./heartbeats.js";
import { PauseDetector, SYSTEM_CLOCKS, type ClockJump, type Clocks } from "./liveness.js";
import { OperatorMetrics, type FleetView } from "./metrics.js";
import { NodeAddresses } from "../peers/address.js";
import { servingNodes } from "../peers/sources-status.js";
import { rfc3339 } from "../../api/time.js";
import { RefusalBackoff, refusalCondition, withoutRefusal } from "../../api/status-refusal.js";
import type { ApiError } from "../../api/errors.js";
import { REQUEST_TIMEOUT_MS } from "../../api/kubeconfig.js";

// The log the operator's parts write to lives in ./logger.ts (./hold.ts takes it from there).
import type { Logger } from "../logger.js";

export interface OperatorOptions {
  identity: string;
  startGraceSeconds?: number;
  /** The page's 40 s; lower only in tests. */
  lostAfterSeconds?: number;
  turnDeadlineSeconds?: number;
  channelIntervalMs?: number;
  endpoint?: string;
  /** Hold a Lease in liken-system and reconcile only while holding it (default true). */
  leaderElection?: boolean;
  /** How often every Cluster is looked at even without events (time-based rules). */
  tickMs?: number;
  log: Logger;
  events?: EventSink;
  /** Test seam (hold.ts): runs between a decision that grants and its write. */
  beforeTurnWrite?: BeforeTurnWrite;
  /** Test seam: the wall and monotonic clocks this copy reads (default: the system's). */
  clocks?: Clocks;
}

/** What the operator did, for logs at exit and the benchmark. */
export interface OperatorStats {
  reconciles: number;
  clusterWrites: number;
  machineWrites: number;
  conflicts: number;
  reads: number;
  events: number;
  grants: number;
  releases: number;
  stalls: number;
  wakeUps: number;
  /** Status writes the API server refused as Invalid (422). */
  refusals: number;
  /** The V8 heap in use, MiB: its peak as sampled every tick, and at stop. */
  heapPeakMiB: number;
  heapMiB: number;
  /** decide()'s time, ms: the 99th percentile of the last 4,096 decisions, and in all (at stop). */
  decideP99Ms: number;
  decideMs: number;
  /** The most Lost marks in flight at once (at most MAX_MARKS_IN_FLIGHT). */
  marksInFlightPeak: number;
  /**
   * Where a grant's time goes inside this copy (passes.ts), p99 over the last passes, ms: how
   * long a Cluster's first event waited for its pass, how long a pass took (decide and the
   * status write), and the status write's round trip alone (the API server's share).
   */
  passWaitP99Ms: number;
  /**
   * decide()'s CPU (this process's, process.cpuUsage around it), p99, ms: its own cost, which a
   * loaded machine's wait for a core (in decideP99Ms, wall time) does not move.
   */
  decideCpuP99Ms: number;
  passP99Ms: number;
  statusWriteP99Ms: number;
}

/** The connections the operator's Events use at once, at most (eventsConfig). */
export const EVENT_CONNECTIONS = 4;

/** Lost marks (Machine status writes, each with its Event) in flight at once, at most. */
export const MAX_MARKS_IN_FLIGHT = 16;

const DEFAULT_TICK_MS = 1000;
const MAX_ATTEMPTS = 5;
const FIELD_MANAGER = "cluster-operator";

/** Machines and the resourceVersion they are as of. */
interface MachineView {
  machines: readonly Machine[];
  version: string;
}

/** The Event each Alive mark is announced with. */
const LOST_MARK_EVENTS: Record<AliveReason, { event: EventReason; type: "Normal" | "Warning" }> = {
  NoHeartbeat: { event: "MachineLost", type: "Warning" },
  HeartbeatUnseen: { event: "HeartbeatUnseen", type: "Warning" },
  HeartbeatReturned: { event: "MachineBack", type: "Normal" },
};

export class Operator {
  readonly stats: OperatorStats = {
    reconciles: 0,
    clusterWrites: 0,
    machineWrites: 0,
    conflicts: 0,
    reads: 0,
    events: 0,
    grants: 0,
    releases: 0,
    stalls: 0,
    wakeUps: 0,
    refusals: 0,
    heapPeakMiB: 0,
    heapMiB: 0,
    decideP99Ms: 0,
    decideMs: 0,
    marksInFlightPeak: 0,
    passWaitP99Ms: 0,
    decideCpuP99Ms: 0,
    passP99Ms: 0,
    statusWriteP99Ms: 0,
  };
  /** The last durations behind the stats' percentiles (samples.ts). */
  private readonly timings = {
    decide: new Samples(),
    decideCpu: new Samples(),
    passWait: new Samples(),
    pass: new Samples(),
    statusWrite: new Samples(),
  };
  /** Prometheus metrics of this copy; `liken operator` serves its registry. */
  readonly metrics: OperatorMetrics;
  /** What the watches hold now, as kept (trim.ts): the metrics' view, and the tests'. */
  readonly fleet: FleetView;
  private readonly api: LikenApi;
  private readonly settings: DecideSettings;
  private readonly clusters: ResourceWatcher<Cluster>;
  private readonly machines: ResourceWatcher<Machine>;
  /** The watched Machines by Cluster (machine-index.ts): a pass's view, copied only on change. */
  private readonly byCluster = new MachineIndex();
  /** The addresses of the Nodes whose machines serve peers (peer-address.ts). */
  private readonly nodeAddresses: NodeAddresses;
  private readonly heartbeats: HeartbeatTracker;
  private readonly leases: LeaseWatch;
  private readonly pause: PauseDetector;
  private readonly elector: LeaseElector | undefined;
  private readonly events: EventSink;
  private readonly clocks: Clocks;
  private startedAt = new Date();
  /** A Cluster this copy wrote, until the watch delivers that version. */
  private readonly written = new Map<string, Cluster>();
  private readonly channelViews = new Map<string, ChannelView>();
  private readonly polls = new Map<string, PollState & { inFlight?: boolean }>();
  private readonly marking = new Set<string>();
  /** Lost marks a pass decided but left for later (MAX_MARKS_IN_FLIGHT). */
  private marksLeft = false;
  /** Release floors (release.yaml revertFloor) read for a revert (revert.ts, floor.ts). */
  private readonly floors = new FloorCache();
  /** spec.rollout.revert.prometheus's checks, run on their interval (prom-check.ts). */
  private readonly queries = new QueryChecks();
  /** Clusters whose last status write was refused (422): no same write before the backoff. */
  private readonly refusals = new RefusalBackoff();
  /** One decision per burst of events (passes.ts). */
  private readonly passes: PassScheduler;
  private ticker: NodeJS.Timeout | undefined;
  private stopped = true;

  constructor(
    kc: KubeConfig,
    private readonly opts: OperatorOptions,
  ) {
    this.api = new LikenApi(kc, FIELD_MANAGER);
    this.passes = new PassScheduler((name) => this.reconcile(name), {
      onError: (name, e) =>
        opts.log.error({ cluster: name, err: String(e) }, "reconcile failed; retrying"),
      onPass: (_name, waitMs, passMs) => {
        this.timings.passWait.add(waitMs);
        this.timings.pass.add(passMs);
      },
      onSlow: (name, runningMs) =>
        opts.log.warn(
          { cluster: name, runningMs: Math.round(runningMs) },
          `the pass over Cluster ${name} has run for ${Math.round(runningMs / 1000)} s and every later pass waits for it; it waits on the API server (each request gives up after ${REQUEST_TIMEOUT_MS / 1000} s)`,
        ),
    });
    this.clocks = opts.clocks ?? SYSTEM_CLOCKS;
    this.settings = {
      identity: opts.identity,
      startGraceSeconds: opts.startGraceSeconds ?? DEFAULT_SETTINGS.startGraceSeconds,
      lostAfterSeconds: opts.lostAfterSeconds ?? DEFAULT_SETTINGS.lostAfterSeconds,
      turnDeadlineSeconds: opts.turnDeadlineSeconds ?? DEFAULT_SETTINGS.turnDeadlineSeconds,
      ...(opts.endpoint === undefined ? {} : { endpoint: opts.endpoint }),
    };
    const onError = (what: string) => (e: unknown) =>
      opts.log.warn({ err: String(e) }, `${what} failed; liken retries`);
    this.clusters = new ResourceWatcher(
      this.api.clusters,
      {
        onChange: (ev) => {
          const name = ev.object.metadata.name;
          // Any event for this Cluster ends the use of our own last write as its state: the
          // watch now carries our write or something newer (a person's annotation, a spec
          // edit), which a kept copy would hide forever. If the event is older than our write,
          // the next status write meets a 409 and decides again: the guard keeps it safe.
          this.written.delete(name);
          if (ev.type === "deleted") this.forgetCluster(name);
          else this.schedule(name);
        },
        onError: onError("watching Clusters"),
      },
      { trim: trimObject },
    );
    this.machines = new ResourceWatcher(
      this.api.machines,
      {
        onChange: (ev) => {
          // The Cluster it left (spec.cluster edited) is passed over too: its budget changed.
          const before = this.byCluster.clusterOfName(ev.object.metadata.name);
          if (ev.type === "deleted") this.byCluster.delete(ev.object);
          else this.byCluster.set(ev.object);
          if (before !== undefined && before !== ev.object.spec.cluster) this.schedule(before);
          this.schedule(ev.object.spec.cluster);
        },
        onSync: (machines) => this.byCluster.sync(machines),
        onError: onError("watching Machines"),
      },
      { trim: trimObject },
    );
    this.heartbeats = new HeartbeatTracker(this.clocks.mono());
    this.leases = watchHeartbeats(
      kc,
      this.heartbeats,
      (machine) => {
        const m = this.machines.get(machine);
        if (m?.status?.step === "Lost") this.schedule(m.spec.cluster);
      },
      onError("watching heartbeat Leases"),
      this.clocks.mono,
    );
    this.nodeAddresses = new NodeAddresses(
      kc,
      () => {
        for (const c of this.clusters.list()) this.schedule(c.metadata.name);
      },
      onError("reading a Node's addresses"),
    );
    this.pause = new PauseDetector((jump, now, mono) => this.jumped(jump, now, mono), this.clocks);
    this.events =
      opts.events ??
      new KubeEvents(eventsConfig(kc), "cluster-operator", opts.identity, onError("an Event"));
    this.fleet = {
      clusters: () => this.clusters.list(),
      machines: () => this.machines.list(),
      leading: () => this.leading(),
    };
    this.metrics = new OperatorMetrics(this.fleet);
    if (opts.leaderElection ?? true) {
      this.elector = new LeaseElector(
        kc,
        opts.identity,
        (leader) => {
          opts.log.info({ leader }, leader ? "leading" : "standing by");
          if (leader) for (const c of this.clusters.list()) this.schedule(c.metadata.name);
        },
        onError("leader election"),
      );
    }
  }

  /** Starts watching; resolves once the first lists are in. Grants wait for the grace. */
  async start(): Promise<void> {
    this.stopped = false;
    this.passes.start();
    this.startedAt = new Date(this.clocks.wall());
    this.heartbeats.rebaseline(this.clocks.mono());
    this.pause.start();
    await Promise.all([this.machines.start(), this.leases.start()]);
    await this.clusters.start();
    this.elector?.start();
    const tickMs = this.opts.tickMs ?? DEFAULT_TICK_MS;
    this.ticker = setInterval(() => {
      this.sampleHeap();
      for (const c of this.clusters.list()) this.schedule(c.metadata.name);
    }, tickMs);
    this.opts.log.info(
      {
        grantsFrom: rfc3339(this.graceEnds()),
        // The same instant to the millisecond, for tools that measure grant latency.
        grantsFromMs: this.graceEnds().getTime(),
        startGraceSeconds: this.settings.startGraceSeconds,
      },
      "cluster-operator started",
    );
    for (const c of this.clusters.list()) this.schedule(c.metadata.name);
  }

  async stop(): Promise<void> {
    this.sampleHeap();
    this.percentiles();
    this.stopped = true;
    clearInterval(this.ticker);
    this.passes.stop();
    this.pause.stop();
    this.nodeAddresses.stop();
    this.clusters.stop();
    this.machines.stop();
    await this.leases.stop();
    await this.elector?.stop();
  }

  /** The heap figures of the stats (getHeapStatistics: cheap, unlike memoryUsage's RSS read). */
  private sampleHeap(): void {
    const mib = getHeapStatistics().used_heap_size / 2 ** 20;
    this.stats.heapMiB = Math.round(mib);
    this.stats.heapPeakMiB = Math.max(this.stats.heapPeakMiB, this.stats.heapMiB);
  }

  /** The stats' percentiles, over the last samples of each (at stop: a sort each). */
  private percentiles(): void {
    const t = this.timings;
    this.stats.decideP99Ms = t.decide.percentile(99);
    this.stats.decideMs = round2(t.decide.total);
    this.stats.decideCpuP99Ms = t.decideCpu.percentile(99);
    this.stats.passWaitP99Ms = t.passWait.percentile(99);
    this.stats.passP99Ms = t.pass.percentile(99);
    this.stats.statusWriteP99Ms = t.statusWrite.percentile(99);
  }

  /** Whether this copy acts: it leads (or runs without leader election) and is started. */
  leading(): boolean {
    return !this.stopped && (this.elector?.isLeader() ?? true);
  }

  private graceEnds(): Date {
    return new Date(this.startedAt.getTime() + this.settings.startGraceSeconds * 1000);
  }

  private jumped(jump: ClockJump, now: Date, mono: number): void {
    switch (jump.kind) {
      case "paused":
        return this.wake(jump.ms, now, mono);
      case "stepped-back":
        // Nothing seen is stale and the heartbeats are on the monotonic clock: only the
        // grace, a wall time, starts again from the new wall time (liveness.ts says why).
        this.startedAt = now;
        this.opts.log.warn(
          { steppedBackMs: jump.ms, grantsFrom: rfc3339(this.graceEnds()) },
          "the wall clock was stepped back: the start-up grace counts again from the new time",
        );
        return;
      default: {
        const never: never = jump;
        throw new Error(`unknown clock jump ${JSON.stringify(never)}`);
      }
    }
  }

  /**
   * Woke from a pause: everything seen before is stale. Grant nothing for the grace again,
   * judge heartbeats from now, and list everything again.
   */
  private wake(pausedMs: number, now: Date, mono: number): void {
    this.stats.wakeUps++;
    this.startedAt = now;
    this.heartbeats.rebaseline(mono);
    this.written.clear();
    this.opts.log.warn(
      { pausedMs, grantsFrom: rfc3339(this.graceEnds()) },
      "this copy was paused: its view is stale; no grant until the grace has passed again",
    );
    // Restart the watches: their caches are as old as the pause.
    this.machines.stop();
    this.clusters.stop();
    void this.machines.start();
    void this.clusters.start();
  }

  private forgetCluster(name: string): void {
    this.written.delete(name);
    this.channelViews.delete(name);
    this.polls.delete(name);
    this.queries.forget(name);
  }

  schedule(cluster: string): void {
    if (this.stopped) return;
    this.passes.schedule(cluster);
  }

  private current(name: string): Cluster | undefined {
    return this.written.get(name) ?? this.clusters.get(name);
  }

  private machinesOf(cluster: string): readonly Machine[] {
    return this.byCluster.of(cluster);
  }

  /** A channel view is used once: by the status write that carries it, or found already there. */
  private spendChannelView(name: string, channel: ChannelView | undefined): void {
    if (channel !== undefined && this.channelViews.get(name) === channel) {
      this.channelViews.delete(name);
    }
  }

  private async reconcile(name: string): Promise<void> {
    if (this.elector !== undefined && !this.elector.isLeader()) return;
    if (this.pause.check()) return;
    let cluster = this.current(name);
    if (cluster === undefined) return;
    // A refused write waits for its backoff (a timer schedules it), unless the spec changed.
    if (this.refusals.holds(name, generationOf(cluster), Date.now())) return;
    this.stats.reconciles++;
    this.maybePollChannel(cluster);
    for (let attempt = 1; ; attempt++) {
      const channel = this.channelViews.get(name);
      const d = await this.decideFresh(cluster, channel);
      if (d === undefined) return; // paused while reading the Machines
      this.readForRevert(cluster, d);
      this.writeLostMarks(cluster, d.lostMarks);
      if (attempt > 1) this.logDecision(cluster, d, "decided again on the Cluster as it is now");
      const { status, needed } = statusToWrite(d);
      if (!needed) {
        // The channel's news is already in the status: the view is spent, and a view left
        // behind would block every later read (maybePollChannel waits for it).
        this.spendChannelView(name, channel);
        return;
      }
      this.noteCut(name, d.cut); // only with a write: an unchanged status would log every tick
      try {
        await this.beforeTurnWrite(name, d);
        const sent = performance.now();
        const written = await this.api.clusters.replaceStatus(
          { ...cluster, status },
          { fieldManager: FIELD_MANAGER },
        );
        this.timings.statusWrite.add(performance.now() - sent);
        this.stats.clusterWrites++;
        this.refusals.clear(name);
        this.written.set(name, trimObject(written));
        this.spendChannelView(name, channel);
        this.announce(written, d);
        return;
      } catch (e) {
        if (this.writeEnded(cluster, e, d.cut)) return;
        if (!isConflict(e) || attempt >= MAX_ATTEMPTS) throw e;
        // Another writer (a second copy, a person) changed the Cluster: decide again from
        // the Cluster as it is now. Never replay a decision onto a state it was not made for.
        this.stats.conflicts++;
        this.logDecision(
          cluster,
          d,
          "the Cluster changed since this copy read it (409 Conflict): nothing was written; deciding again",
        );
        this.written.delete(name);
        this.stats.reads++;
        cluster = await this.api.clusters.get(name);
        if (this.pause.check()) return;
      }
    }
  }

  /** A revert waits for the floor of the release it leaves (floor.ts); the Prometheus check runs (prom-check.ts). */
  private readForRevert(cluster: Cluster, d: Decision): void {
    const name = cluster.metadata.name;
    if (d.floorWanted !== undefined) {
      this.floors.want(cluster, d.floorWanted, () => this.schedule(name));
    }
    const q = d.queryWanted;
    if (q !== undefined) {
      this.queries.maybe(
        name,
        q.release,
        q.check,
        this.clocks.mono(),
        () => this.schedule(name),
        this.clocks.wall(),
      );
    }
  }

  /**
   * decide() on the Cluster and the cached Machines; when a release needs a Machine view as
   * new as the Cluster and the cache is older, again on the Machines read from the API server
   * (freshness.ts). Undefined: this copy was paused meanwhile (decide nothing).
   */
  private async decideFresh(
    cluster: Cluster,
    channel: ChannelView | undefined,
  ): Promise<Decision | undefined> {
    const cached = {
      machines: this.machinesOf(cluster.metadata.name),
      version: this.machines.version,
    };
    const d = this.decideOn(cluster, cached, channel);
    if (!d.needsFreshMachines) return d;
    const fresh = await this.readMachines(cluster);
    if (this.pause.check()) return undefined;
    return this.decideOn(cluster, fresh, channel);
  }

  private decideOn(
    cluster: Cluster,
    view: MachineView,
    channel: ChannelView | undefined,
  ): Decision {
    const t0 = performance.now();
    const cpu0 = process.cpuUsage();
    const d = decide(
      {
        cluster,
        machines: view.machines,
        machinesVersion: view.version,
        nodeAddresses: this.nodeAddresses.of(servingNodes(cluster, view.machines)),
        heartbeats: this.heartbeats.view(),
        now: new Date(this.clocks.wall()),
        mono: this.clocks.mono(),
        startedAt: this.startedAt,
        floors: this.floors.view(),
        queryChecks: this.queries.view(cluster.metadata.name),
        ...(channel === undefined ? {} : { channel }),
      },
      this.settings,
    );
    const ms = performance.now() - t0;
    const cpu = process.cpuUsage(cpu0);
    this.timings.decide.add(ms);
    this.timings.decideCpu.add((cpu.user + cpu.system) / 1000);
    this.metrics.decideTook(cluster.metadata.name, ms);
    return d;
  }

  /**
   * The Machines of a Cluster read from the API server (a quorum list: as new as anything this
   * copy read before), for a release the cached view is too old to decide.
   */
  private async readMachines(cluster: Cluster): Promise<MachineView> {
    const name = cluster.metadata.name;
    this.stats.reads++;
    const list = await this.api.machines.list();
    this.opts.log.info(
      {
        cluster: name,
        clusterVersion: cluster.metadata.resourceVersion,
        cacheVersion: this.machines.version,
        listVersion: list.resourceVersion,
      },
      "a turn would be released on a Machine cache older than the Cluster: read the Machines again",
    );
    const machines = list.items.filter((m) => m.spec.cluster === name);
    return { machines, version: list.resourceVersion };
  }

  /** A write that no retry now can help: the Cluster is gone (404) or refused it (422). */
  private writeEnded(cluster: Cluster, e: unknown, cut: readonly string[]): boolean {
    if (isNotFound(e)) return true;
    if (!isInvalid(e)) return false;
    this.statusRefused(cluster, e, cut);
    return true;
  }

  /** A maker missed a bound (bounds.ts): the field was cut to fit, and that is a bug. */
  private noteCut(cluster: string, cut: readonly string[]): void {
    if (cut.length > 0) {
      this.opts.log.warn({ cluster, fields: cut }, "status fields cut to their bounds");
    }
  }

  /**
   * The API server refused the status as Invalid (422): nothing of this decision was recorded
   * (no grant, no release, no stall). Say so where a person looks (an Event, the condition
   * StatusWriteRefused written alone on the Cluster as the server has it) and write again only
   * after a backoff (status-refusal.ts), not every second.
   */
  private statusRefused(cluster: Cluster, e: ApiError, cut: readonly string[]): void {
    const name = cluster.metadata.name;
    const delay = this.refusals.refused(name, generationOf(cluster), Date.now());
    setTimeout(() => this.schedule(name), delay).unref();
    this.stats.refusals++;
    const cond = refusalCondition("Cluster", name, e, delay);
    this.opts.log.error(
      { cluster: name, code: e.code, retryMs: delay, cut, causes: e.causes },
      cond.message,
    );
    this.event(cluster, "Warning", "StatusWriteRefused", cond.message);
    const conditions = setCondition<ClusterCondition>(
      cluster.status?.conditions,
      cond,
      rfc3339(new Date()),
    );
    this.api.clusters
      .patchStatus(
        name,
        { status: { conditions } },
        {
          ...(cluster.metadata.resourceVersion === undefined
            ? {}
            : { resourceVersion: cluster.metadata.resourceVersion }),
          fieldManager: FIELD_MANAGER,
        },
      )
      .catch((err: unknown) => {
        // A conflict: the Cluster moved on; the next attempt decides (and says) again.
        this.opts.log.warn({ cluster: name, err: String(err) }, "StatusWriteRefused not written");
      });
  }

  private async beforeTurnWrite(name: string, d: Decision): Promise<void> {
    const hook = this.opts.beforeTurnWrite;
    // A write that starts a revert is held too: it is the revert's lock (revert.ts).
    const revert = d.revertStarted !== undefined || d.revertRetargeted !== undefined;
    if (hook !== undefined && (d.grants.length > 0 || revert)) {
      await hook(name, d.grants);
    }
  }

  /** A decision around a conflict, named by the resourceVersion it was made on. */
  private logDecision(cluster: Cluster, d: Decision, msg: string): void {
    const fields = {
      cluster: cluster.metadata.name,
      resourceVersion: cluster.metadata.resourceVersion,
      grants: d.grants.map((g) => g.machine),
      blocked: d.blocked?.kind,
    };
    this.opts.log.info(fields, msg);
  }

  private announce(cluster: Cluster, d: Decision): void {
    const log = this.opts.log;
    this.metrics.decided(cluster.metadata.name, d, (m) => this.machines.get(m));
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
    for (const s of d.stalls) {
      this.stats.stalls++;
      log.warn({ cluster: cluster.metadata.name, machine: s.turn.machine }, s.message);
      this.event(cluster, "Warning", "RolloutStalled", `rollout stalled: ${s.message}`);
    }
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
    // Rollout brakes (brake.ts, windows.ts): one Event when one begins to hold.
    if (d.held !== undefined) {
      // A failed or revoked release is a warning; a window, a canary, a pause or a first
      // trial is the plan.
      const failed = d.held.reason === "ReleaseFailed" || d.held.reason === "ReleaseRevoked";
      const what = { cluster: cluster.metadata.name, reason: d.held.reason };
      if (failed) log.warn(what, d.held.message);
      else log.info(what, d.held.message);
      this.event(cluster, failed ? "Warning" : "Normal", d.held.reason, d.held.message);
    }
  }

  private event(
    cluster: Cluster,
    type: "Normal" | "Warning",
    reason: Parameters<EventSink["record"]>[2],
    msg: string,
  ): void {
    this.stats.events++;
    this.events.record(cluster, type, reason, msg);
  }

  /**
   * Marks a silent machine Lost (or back), each write conditioned on what was decided on. At
   * most MAX_MARKS_IN_FLIGHT at once: when thousands of machines go silent together (a
   * partition; a starved heartbeat sender) a write each at once opened as many TLS connections
   * with their Events, which took most of the operator's CPU. The marks left out are decided
   * again by the pass the last write in flight schedules.
   */
  private writeLostMarks(cluster: Cluster, marks: readonly LostMark[]): void {
    for (const mark of marks) {
      if (this.marking.has(mark.machine)) continue;
      if (this.marking.size >= MAX_MARKS_IN_FLIGHT) {
        this.marksLeft = true;
        break;
      }
      const m = this.machines.get(mark.machine);
      if (m === undefined || mark.resourceVersion === undefined) continue;
      // The conditions below come from the cache: only when it holds the very Machine the mark
      // was decided on (a decision on a fresh list may be newer); the next pass marks otherwise.
      if (m.metadata.resourceVersion !== mark.resourceVersion) continue;
      this.marking.add(mark.machine);
      const now = rfc3339(new Date(this.clocks.wall()));
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
      this.api.machines
        .patchStatus(
          mark.machine,
          { status: { ...step, conditions } },
          { resourceVersion: mark.resourceVersion, fieldManager: FIELD_MANAGER },
        )
        .then(
          () => {
            this.stats.machineWrites++;
            const { event, type } = LOST_MARK_EVENTS[mark.reason];
            const msg = `Machine ${mark.machine}: ${mark.message}`;
            const fields = {
              cluster: cluster.metadata.name,
              machine: mark.machine,
              reason: mark.reason,
            };
            if (type === "Warning") this.opts.log.warn(fields, msg);
            else this.opts.log.info(fields, msg);
            this.event(cluster, type, event, msg);
          },
          (e: unknown) => {
            // A conflict means the agent (or another copy) wrote first: decide again.
            if (!isConflict(e) && !isNotFound(e)) {
              this.opts.log.warn({ machine: mark.machine, err: String(e) }, "Lost mark failed");
            }
          },
        )
        .finally(() => {
          this.marking.delete(mark.machine);
          if (this.marking.size === 0 && this.marksLeft) {
            this.marksLeft = false;
            this.schedule(cluster.metadata.name);
          }
        });
      this.stats.marksInFlightPeak = Math.max(this.stats.marksInFlightPeak, this.marking.size);
    }
  }

  /**
   * A signed channel's verdict, counted and announced: a refusal is counted every read (the
   * metric), an Event when the verdict changes (not every poll).
   */
  private noteTrust(cluster: Cluster, view: ChannelView): void {
    const t = view.trust;
    if (t === undefined) return;
    const name = cluster.metadata.name;
    if (t.fault !== undefined) this.metrics.trustRefused(name, t.fault.reason, t.fault.role);
    else if (t.condition.status === "False")
      this.metrics.trustRefused(name, t.condition.reason, "targets");
    const old = cluster.status?.conditions?.find((c) => c.type === "ChannelTrusted");
    if (old?.status === t.condition.status && old.reason === t.condition.reason) return;
    const good = t.condition.status === "True";
    if (!good) this.opts.log.warn({ cluster: name }, t.condition.message);
    this.event(
      cluster,
      good ? "Normal" : "Warning",
      good ? "ChannelTrusted" : "ChannelDistrusted",
      `${t.condition.reason}: ${t.condition.message}`,
    );
  }

  /** Starts a channel read when one is due; its result joins the next status write. */
  private maybePollChannel(cluster: Cluster): void {
    const name = cluster.metadata.name;
    const state = this.polls.get(name) ?? {};
    this.polls.set(name, state);
    if (state.inFlight || this.channelViews.has(name)) return;
    const interval = this.opts.channelIntervalMs ?? DEFAULT_CHANNEL_INTERVAL_MS;
    const due = pollDue(cluster, state, new Date(), interval);
    if (!due.due) return;
    state.inFlight = true;
    state.lastPollAt = new Date();
    const read = trustModeOf(cluster) === "pinned" ? readChannel : readTrust;
    // The trust read judges expiry on this copy's wall clock (the test seam moves it).
    read(cluster, () => new Date(this.clocks.wall()))
      .then((view) => {
        this.metrics.channelRead(name, view.condition.reason);
        this.noteTrust(cluster, view);
        this.channelViews.set(name, view);
        if (view.condition.status !== "True") {
          this.opts.log.warn({ cluster: name }, view.condition.message);
        }
      })
      .catch((e: unknown) => {
        this.metrics.channelRead(name, "Error");
        this.opts.log.error({ cluster: name, err: String(e) }, "channel");
      })
      .finally(() => {
        state.inFlight = false;
        this.schedule(name);
      });
  }
}

/**
 * The status to write: the decision's, without StatusWriteRefused (a write accepted ends the
 * refusal), and whether to write it (a change, or a refusal condition to take away).
 */
function statusToWrite(d: Decision): { status: Cluster["status"]; needed: boolean } {
  const conditions = withoutRefusal(d.status.conditions);
  if (conditions === d.status.conditions) return { status: d.status, needed: d.changed };
  return {
    status: { ...d.status, ...(conditions === undefined ? {} : { conditions }) },
    needed: true,
  };
}

/**
 * The Events' own copy of the kubeconfig, whose connections are at most EVENT_CONNECTIONS: a
 * pass that grants 500 turns makes 500 Events at once, and on the shared connections (no cap:
 * the watches hold theirs) each found none free and opened its own TLS connection, which cost
 * the operator most of its CPU outside decide and the API server a handshake each, at the
 * moment the wave's status writes needed it (docs/operator-profile.md). Events are best effort
 * and nothing waits for them: they queue on a few kept connections instead.
 */
export function eventsConfig(kc: KubeConfig): KubeConfig {
  const copy = new KubeConfig();
  copy.loadFromOptions({
    clusters: kc.clusters,
    users: kc.users,
    contexts: kc.contexts,
    currentContext: kc.currentContext,
  });
  return reuseConnections(copy, { maxSockets: EVENT_CONNECTIONS });
}

/** What a Cluster status is decided from, as far as a refusal goes: the spec's generation. */
function generationOf(c: Cluster): string {
  return String(c.metadata.generation ?? "");
}
