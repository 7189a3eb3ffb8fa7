// cluster-operator's wiring: watches (Clusters, Machines, heartbeat Leases), a serial
// reconcile per Cluster, the guarded writes, Events. Every decision is decide()'s; this
// file only observes, writes what was decided, and says what happened. Each part is its own
// module: watches.ts (what this copy sees), decider.ts (decide() on it), lost-marks.ts,
// status-refused.ts, channel-reads.ts, announce.ts (what a written decision says), stats.ts.
//
//   watch events / 1 s tick ──► dirty clusters ──► reconcile(cluster)
//        decide(observed) ──► Lost marks (Machine status, conditioned on its resourceVersion)
//                         ──► Cluster status (conditioned on its resourceVersion)
//                               409 ─► GET the Cluster, decide again, write again
//                               ok  ─► Events for grants, releases, stalls
import { performance } from "node:perf_hooks";
import type { KubeConfig } from "@kubernetes/client-node";
import { LikenApi, isConflict, type Cluster, type Machine } from "../../api/index.js";
import { DEFAULT_CHANNEL_INTERVAL_MS } from "../channel/poll.js";
import { DEFAULT_SETTINGS, type Decision, type DecideSettings } from "../decide/decide.js";
import { LeaseElector } from "./election.js";
import { PassScheduler } from "./passes.js";
import { trimObject } from "./trim.js";
import type { BeforeTurnWrite } from "./hold.js";
import { KubeEvents, eventsConfig, type EventSink } from "../events.js";
import { PauseDetector, SYSTEM_CLOCKS, type ClockJump, type Clocks } from "./liveness.js";
import { OperatorMetrics, type FleetView } from "./metrics.js";
import { rfc3339 } from "../../api/time.js";
import { REQUEST_TIMEOUT_MS } from "../../api/kubeconfig.js";
import { Announcer } from "./announce.js";
import { Decider } from "./decider.js";
import { ChannelReads } from "./channel-reads.js";
import { LostMarks } from "./lost-marks.js";
import { StatusRefusals, statusToWrite } from "./status-refused.js";
import { Watches } from "./watches.js";
import { Timings, newStats, percentiles, sampleHeap, type OperatorStats } from "./stats.js";

// The log the operator's parts write to lives in ./logger.ts (./hold.ts takes it from there).
import type { Logger } from "../logger.js";

// Kept importable from here, where tests and callers import them.
export { EVENT_CONNECTIONS, eventsConfig } from "../events.js";
export { MAX_MARKS_IN_FLIGHT } from "./lost-marks.js";
export type { OperatorStats } from "./stats.js";

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

const DEFAULT_TICK_MS = 1000;
const MAX_ATTEMPTS = 5;
const FIELD_MANAGER = "cluster-operator";

export class Operator {
  readonly stats: OperatorStats = newStats();
  /** The last durations behind the stats' percentiles (samples.ts). */
  private readonly timings = new Timings();
  /** Prometheus metrics of this copy; `liken operator` serves its registry. */
  readonly metrics: OperatorMetrics;
  /** What the watches hold now, as kept (trim.ts): the metrics' view, and the tests'. */
  readonly fleet: FleetView;
  private readonly api: LikenApi;
  /** The Clusters, Machines, heartbeats and Node addresses this copy sees (watches.ts). */
  private readonly watches: Watches;
  private readonly pause: PauseDetector;
  private readonly elector: LeaseElector | undefined;
  private readonly clocks: Clocks;
  /** A Cluster this copy wrote, until the watch delivers that version. */
  private readonly written = new Map<string, Cluster>();
  /** One decision per burst of events (passes.ts). */
  private readonly passes: PassScheduler;
  /** decide() on what this copy observes, timed; the reads a decision asks for (decider.ts). */
  private readonly decider: Decider;
  /** What a written decision says: logs, Events, metrics, stats (announce.ts). */
  private readonly announcer: Announcer;
  /** Silent machines marked Lost (or back), a bounded few writes at once (lost-marks.ts). */
  private readonly lostMarks: LostMarks;
  /** The channel reads, each waiting for the status write that carries it (channel-reads.ts). */
  private readonly channel: ChannelReads;
  /** Status writes refused (422) and their backoff (status-refused.ts). */
  private readonly refusals: StatusRefusals;
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
    const settings: DecideSettings = {
      identity: opts.identity,
      startGraceSeconds: opts.startGraceSeconds ?? DEFAULT_SETTINGS.startGraceSeconds,
      lostAfterSeconds: opts.lostAfterSeconds ?? DEFAULT_SETTINGS.lostAfterSeconds,
      turnDeadlineSeconds: opts.turnDeadlineSeconds ?? DEFAULT_SETTINGS.turnDeadlineSeconds,
      ...(opts.endpoint === undefined ? {} : { endpoint: opts.endpoint }),
    };
    const onError = (what: string) => (e: unknown) =>
      opts.log.warn({ err: String(e) }, `${what} failed; liken retries`);
    this.watches = new Watches(kc, this.api, this.clocks, {
      cluster: (name, deleted) => {
        // Any event for this Cluster ends the use of our own last write as its state: the
        // watch now carries our write or something newer (a person's annotation, a spec
        // edit), which a kept copy would hide forever. If the event is older than our write,
        // the next status write meets a 409 and decides again: the guard keeps it safe.
        this.written.delete(name);
        if (deleted) this.forgetCluster(name);
        else this.schedule(name);
      },
      schedule: (name) => this.schedule(name),
      onError,
    });
    const { clusters, machines, byCluster } = this.watches;
    this.pause = new PauseDetector((jump, now, mono) => this.jumped(jump, now, mono), this.clocks);
    this.fleet = {
      clusters: () => clusters.list(),
      machines: () => machines.list(),
      leading: () => this.leading(),
    };
    this.metrics = new OperatorMetrics(this.fleet);
    const events =
      opts.events ??
      new KubeEvents(eventsConfig(kc), "cluster-operator", opts.identity, onError("an Event"));
    const log = opts.log;
    const { api, stats, clocks, metrics } = this;
    const fieldManager = FIELD_MANAGER;
    const schedule = (name: string): void => this.schedule(name);
    const machine = (name: string): Machine | undefined => machines.get(name);
    const announcer = new Announcer(log, events, metrics, stats, machine);
    this.announcer = announcer;
    const parts = { api, fieldManager, clocks, log, stats, announcer, schedule };
    this.lostMarks = new LostMarks({ ...parts, machine });
    const intervalMs = opts.channelIntervalMs ?? DEFAULT_CHANNEL_INTERVAL_MS;
    this.channel = new ChannelReads({ ...parts, metrics, intervalMs });
    this.refusals = new StatusRefusals(parts);
    this.decider = new Decider(settings, {
      ...parts,
      machinesOf: (cluster) => byCluster.of(cluster),
      cacheVersion: () => machines.version,
      heartbeats: this.watches.heartbeats,
      nodeAddresses: this.watches.nodeAddresses,
      paused: () => this.pause.check(),
      timings: this.timings,
      metrics,
    });
    if (opts.leaderElection ?? true) {
      this.elector = new LeaseElector(
        kc,
        opts.identity,
        (leader) => {
          opts.log.info({ leader }, leader ? "leading" : "standing by");
          if (leader) this.scheduleAll();
        },
        onError("leader election"),
      );
    }
  }

  /** Starts watching; resolves once the first lists are in. Grants wait for the grace. */
  async start(): Promise<void> {
    this.stopped = false;
    this.passes.start();
    this.decider.restartGrace(new Date(this.clocks.wall()));
    this.watches.heartbeats.rebaseline(this.clocks.mono());
    this.pause.start();
    await this.watches.start();
    this.elector?.start();
    const tickMs = this.opts.tickMs ?? DEFAULT_TICK_MS;
    this.ticker = setInterval(() => {
      sampleHeap(this.stats);
      this.scheduleAll();
    }, tickMs);
    this.opts.log.info(
      {
        grantsFrom: rfc3339(this.decider.graceEnds()),
        // The same instant to the millisecond, for tools that measure grant latency.
        grantsFromMs: this.decider.graceEnds().getTime(),
        startGraceSeconds: this.decider.settings.startGraceSeconds,
      },
      "cluster-operator started",
    );
    this.scheduleAll();
  }

  async stop(): Promise<void> {
    sampleHeap(this.stats);
    percentiles(this.stats, this.timings);
    this.stopped = true;
    clearInterval(this.ticker);
    this.passes.stop();
    this.pause.stop();
    await this.watches.stop();
    await this.elector?.stop();
  }

  /** Whether this copy acts: it leads (or runs without leader election) and is started. */
  leading(): boolean {
    return !this.stopped && (this.elector?.isLeader() ?? true);
  }

  private jumped(jump: ClockJump, now: Date, mono: number): void {
    switch (jump.kind) {
      case "paused":
        return this.wake(jump.ms, now, mono);
      case "stepped-back":
        // Nothing seen is stale and the heartbeats are on the monotonic clock: only the
        // grace, a wall time, starts again from the new wall time (liveness.ts says why).
        this.decider.restartGrace(now);
        this.opts.log.warn(
          { steppedBackMs: jump.ms, grantsFrom: rfc3339(this.decider.graceEnds()) },
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
    this.decider.restartGrace(now);
    this.watches.heartbeats.rebaseline(mono);
    this.written.clear();
    this.opts.log.warn(
      { pausedMs, grantsFrom: rfc3339(this.decider.graceEnds()) },
      "this copy was paused: its view is stale; no grant until the grace has passed again",
    );
    // Restart the watches: their caches are as old as the pause.
    this.watches.relist();
  }

  private forgetCluster(name: string): void {
    this.written.delete(name);
    this.channel.forget(name);
    this.decider.forget(name);
  }

  schedule(cluster: string): void {
    if (this.stopped) return;
    this.passes.schedule(cluster);
  }

  private scheduleAll(): void {
    for (const c of this.watches.clusters.list()) this.schedule(c.metadata.name);
  }

  private current(name: string): Cluster | undefined {
    return this.written.get(name) ?? this.watches.clusters.get(name);
  }

  private async reconcile(name: string): Promise<void> {
    if (this.elector !== undefined && !this.elector.isLeader()) return;
    if (this.pause.check()) return;
    let cluster = this.current(name);
    if (cluster === undefined) return;
    // A refused write waits for its backoff (a timer schedules it), unless the spec changed.
    if (this.refusals.holds(cluster)) return;
    this.stats.reconciles++;
    this.channel.maybePoll(cluster);
    for (let attempt = 1; ; attempt++) {
      const channel = this.channel.view(name);
      const d = await this.decider.decideFresh(cluster, channel);
      if (d === undefined) return; // paused while reading the Machines
      this.decider.readForRevert(cluster, d);
      this.lostMarks.write(cluster, d.lostMarks);
      if (attempt > 1) this.logDecision(cluster, d, "decided again on the Cluster as it is now");
      const { status, needed } = statusToWrite(d);
      if (!needed) {
        // The channel's news is already in the status: the view is spent, and a view left
        // behind would block every later read (ChannelReads.maybePoll waits for it).
        this.channel.spend(name, channel);
        return;
      }
      this.refusals.noteCut(name, d.cut); // only with a write: an unchanged status would log every tick
      try {
        await this.beforeTurnWrite(name, d);
        const sent = performance.now();
        const written = await this.api.clusters.replaceStatus(
          { ...cluster, status },
          { fieldManager: FIELD_MANAGER },
        );
        this.timings.statusWrite.add(performance.now() - sent);
        this.stats.clusterWrites++;
        this.refusals.accepted(name);
        this.written.set(name, trimObject(written));
        this.channel.spend(name, channel);
        this.announcer.announce(written, d);
        return;
      } catch (e) {
        if (this.refusals.writeEnded(cluster, e, d.cut)) return;
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
}
