// cluster-operator's Prometheus metrics (docs/metrics.md names each one). Two kinds:
//   - events, counted where the operator announces them: turns granted and released (by
//     reason), the latency from a machine's turn request to its grant, failed trials (a turn
//     released because its machine rolled back), channel reads by result;
//   - state, read at scrape time from the operator's own watch caches: turns in flight,
//     machines by step, stalled rollouts, whether this copy leads. Reading at scrape time
//     means a gauge can never drift from the objects the operator decides on.
// Each Operator owns its registry, so two copies in one test process never share counters.
import { Counter, Gauge, Histogram, Registry } from "prom-client";
import {
  CHANNEL_REASONS,
  LABEL_RING,
  MACHINE_STEPS,
  type Cluster,
  type Machine,
  type ReleaseEvidence,
} from "../../api/index.js";
import { parseBudget } from "../turns/budget.js";
import { RELEASE_REASONS, type Decision } from "../decide/decide.js";
import { targetOf } from "../view/machine-view.js";
import { recordReasonOf } from "../revert/revert.js";

/** What the state gauges read when scraped. */
export interface FleetView {
  clusters(): readonly Cluster[];
  machines(): readonly Machine[];
  /** Whether this copy acts (holds the Lease, or runs without leader election). */
  leading(): boolean;
}

/**
 * Grant latency buckets, in seconds: a grant normally follows the request within the
 * operator's 1 s tick; tens of seconds mean the budget was full; minutes to hours mean a
 * machine waited behind a slow drain or a stalled rollout.
 */
const LATENCY_BUCKETS = [0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600];

/**
 * decide()'s buckets, in seconds: a pass over a few hundred Machines takes well under a
 * millisecond, one over 5,000 a few; the goal at 5,000 is a p99 under 50 ms.
 */
const DECIDE_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1];

/** The release a Cluster moves to, as the operator decides it; spec.version if that cannot be read. */
function releaseOf(c: Cluster): string {
  try {
    return targetOf(c)?.version ?? "";
  } catch {
    return c.spec.version ?? "";
  }
}

const seconds = (from: string, to: string): number => (Date.parse(to) - Date.parse(from)) / 1000;

export class OperatorMetrics {
  readonly registry = new Registry();
  private readonly granted: Counter<"cluster">;
  private readonly released: Counter<"cluster" | "reason">;
  private readonly latency: Histogram<"cluster">;
  private readonly failedTrials: Counter<"cluster" | "result">;
  private readonly channelReads: Counter<"cluster" | "result">;
  private readonly reverts: Counter<"cluster" | "trigger" | "reason" | "gate">;
  private readonly retargets: Counter<"cluster">;
  private readonly trustRefusals: Counter<"cluster" | "reason" | "role">;
  private readonly decideSeconds: Histogram<"cluster">;

  constructor(view: FleetView) {
    const registers = [this.registry];
    this.granted = new Counter({
      name: "liken_operator_turns_granted_total",
      help: "Reboot turns this copy granted (recorded in Cluster status.rebootTurns).",
      labelNames: ["cluster"],
      registers,
    });
    this.released = new Counter({
      name: "liken_operator_turns_released_total",
      help: `Reboot turns this copy took back, by reason (${RELEASE_REASONS.join(", ")}).`,
      labelNames: ["cluster", "reason"],
      registers,
    });
    this.latency = new Histogram({
      name: "liken_operator_grant_latency_seconds",
      help: "From a machine's turn request (status.turnRequest.at) to the grant of its turn.",
      labelNames: ["cluster"],
      buckets: LATENCY_BUCKETS,
      registers,
    });
    this.failedTrials = new Counter({
      name: "liken_operator_failed_trials_total",
      help: "Turns released because the machine rolled back: its trial fell back (Failed) or was skipped (Skipped).",
      labelNames: ["cluster", "result"],
      registers,
    });
    this.channelReads = new Counter({
      name: "liken_operator_channel_reads_total",
      help: "Reads of a Cluster's release channel, by result (ChannelRead, ChannelUnreachable, ChannelMalformed).",
      labelNames: ["cluster", "result"],
      registers,
    });
    this.reverts = new Counter({
      name: "liken_operator_reverts_total",
      // gate: a configured gate's name (at most 128 characters, as status.revert.gate), so
      // its values are as few as the gates spec.health and agent.yaml configure, plus
      // `prometheus` and `trial <reason>` (a closed set); empty for a request.
      help: "Fleet-wide reverts this copy started, by trigger (Request: liken rollout revert or spec.rollout.revertRequest; Automatic: spec.rollout.revert's threshold), the Reverted condition's reason, and the gate that tripped (a health gate's name, prometheus, trial REASON; empty for a request).",
      labelNames: ["cluster", "trigger", "reason", "gate"],
      registers,
    });
    this.retargets = new Counter({
      name: "liken_operator_revert_retargets_total",
      help: "Reverts in force this copy sent to another release because their target was recalled or revoked since (the newest proven release neither recalled nor revoked); the revert itself is counted once, by liken_operator_reverts_total.",
      labelNames: ["cluster"],
      registers,
    });
    this.trustRefusals = new Counter({
      name: "liken_operator_channel_trust_refusals_total",
      help: "Reads of a signed channel whose metadata was refused, by ChannelTrusted reason and TUF role (root, timestamp, snapshot, targets, target).",
      labelNames: ["cluster", "reason", "role"],
      registers,
    });
    this.decideSeconds = new Histogram({
      name: "liken_operator_decide_seconds",
      help: "How long one decision over a Cluster and its Machines took (decide(), on this copy's CPU).",
      labelNames: ["cluster"],
      buckets: DECIDE_BUCKETS,
      registers,
    });
    new Gauge({
      name: "liken_operator_turns_in_flight",
      help: "Reboot turns recorded in each Cluster's status.rebootTurns now.",
      labelNames: ["cluster"],
      registers,
      collect() {
        this.reset();
        for (const c of view.clusters())
          this.set({ cluster: c.metadata.name }, c.status?.rebootTurns?.length ?? 0);
      },
    });
    new Gauge({
      name: "liken_operator_machines",
      help: `Machines of each Cluster by status.step (${MACHINE_STEPS.join(", ")}; Unknown before the agent's first report).`,
      labelNames: ["cluster", "step"],
      registers,
      collect() {
        this.reset();
        const clusters = view.clusters().map((c) => c.metadata.name);
        // Every step of every Cluster gets a series, 0 included, so an alert on one step
        // compares with a number instead of a missing series.
        for (const cluster of clusters)
          for (const step of MACHINE_STEPS) this.set({ cluster, step }, 0);
        for (const m of view.machines())
          this.inc({ cluster: m.spec.cluster, step: m.status?.step ?? "Unknown" });
      },
    });
    new Gauge({
      name: "liken_operator_machine_versions",
      help: "Machines of each Cluster by the release they run (status.version; Unknown before the agent's first report).",
      labelNames: ["cluster", "version"],
      registers,
      collect() {
        this.reset();
        for (const m of view.machines())
          this.inc({ cluster: m.spec.cluster, version: m.status?.version ?? "Unknown" });
      },
    });
    new Gauge({
      name: "liken_operator_turn_budget",
      help: "How many reboot turns each Cluster may hold at once (spec.disruption.maxUnavailable over its machines).",
      labelNames: ["cluster"],
      registers,
      collect() {
        this.reset();
        const machines = view.machines();
        for (const c of view.clusters()) {
          const total = machines.filter((m) => m.spec.cluster === c.metadata.name).length;
          const b = parseBudget(c.spec.disruption?.maxUnavailable, total);
          this.set({ cluster: c.metadata.name }, b.budget);
        }
      },
    });
    new Gauge({
      name: "liken_operator_machine_certificate_expiry_timestamp_seconds",
      help: "When each machine's client certificate expires (Unix time; status.certificateExpiry as its agent reports it).",
      labelNames: ["cluster", "machine"],
      registers,
      collect() {
        this.reset();
        for (const m of view.machines()) {
          const at = m.status?.certificateExpiry;
          if (at !== undefined) {
            this.set({ cluster: m.spec.cluster, machine: m.metadata.name }, Date.parse(at) / 1000);
          }
        }
      },
    });
    new Gauge({
      name: "liken_operator_machine_identity_expiring",
      help: "1 while a machine's IdentityCurrent condition reads False (ExpiresSoon): its certificate is in the last tenth of its life (at most 30 days) and no renewal succeeded.",
      labelNames: ["cluster", "machine"],
      registers,
      collect() {
        this.reset();
        for (const m of view.machines()) {
          const c = m.status?.conditions?.find((x) => x.type === "IdentityCurrent");
          if (c !== undefined) {
            this.set(
              { cluster: m.spec.cluster, machine: m.metadata.name },
              c.status === "False" ? 1 : 0,
            );
          }
        }
      },
    });
    new Gauge({
      name: "liken_operator_turn_granted_timestamp_seconds",
      help: "When each reboot turn recorded now was granted (Unix time; one series per machine holding a turn).",
      labelNames: ["cluster", "machine"],
      registers,
      collect() {
        this.reset();
        for (const c of view.clusters())
          for (const t of c.status?.rebootTurns ?? [])
            this.set(
              { cluster: c.metadata.name, machine: t.machine },
              Date.parse(t.grantedAt) / 1000,
            );
      },
    });
    new Gauge({
      name: "liken_operator_channel_condition",
      help: `1 for the reason of each Cluster's ChannelReachable condition now (${CHANNEL_REASONS.join(", ")}), 0 for the others; no series before the first read.`,
      labelNames: ["cluster", "reason"],
      registers,
      collect() {
        this.reset();
        for (const c of view.clusters()) {
          const now = c.status?.conditions?.find((x) => x.type === "ChannelReachable")?.reason;
          if (now === undefined) continue;
          for (const reason of CHANNEL_REASONS)
            this.set({ cluster: c.metadata.name, reason }, reason === now ? 1 : 0);
        }
      },
    });
    new Gauge({
      name: "liken_operator_rollout_stalled",
      help: "1 while a Cluster's Progressing condition reads RolloutStalled (no turn is granted until a person resumes).",
      labelNames: ["cluster"],
      registers,
      collect() {
        this.reset();
        for (const c of view.clusters()) {
          const p = c.status?.conditions?.find((x) => x.type === "Progressing");
          this.set({ cluster: c.metadata.name }, p?.reason === "RolloutStalled" ? 1 : 0);
        }
      },
    });
    evidenceGauges(view, registers);
    new Gauge({
      name: "liken_operator_cluster_info",
      help: `1 for each Cluster, labelled with its ring (the ${LABEL_RING} label; empty without it) and the release it moves to (spec.version, or what its signed channel vouches for; empty for none): the fleet page joins on it (docs/fleet.md).`,
      labelNames: ["cluster", "ring", "version"],
      registers,
      collect() {
        this.reset();
        for (const c of view.clusters()) {
          const ring = c.metadata.labels?.[LABEL_RING] ?? "";
          this.set({ cluster: c.metadata.name, ring, version: releaseOf(c) }, 1);
        }
      },
    });
    new Gauge({
      name: "liken_operator_leading",
      help: "1 while this copy acts on Clusters (holds the liken-system/cluster-operator Lease).",
      registers,
      collect() {
        this.set(view.leading() ? 1 : 0);
      },
    });
  }

  /** After a status write succeeded: what it granted, released and stalled. */
  decided(cluster: string, d: Decision, machine: (name: string) => Machine | undefined): void {
    if (d.revertStarted !== undefined) {
      const r = d.revertStarted;
      this.reverts.inc({
        cluster,
        trigger: r.trigger,
        reason: recordReasonOf(r),
        gate: r.gate ?? "",
      });
    }
    if (d.revertRetargeted !== undefined) this.retargets.inc({ cluster });
    for (const g of d.grants) {
      this.granted.inc({ cluster });
      const asked = machine(g.machine)?.status?.turnRequest?.at;
      if (asked !== undefined)
        this.latency.observe({ cluster }, Math.max(0, seconds(asked, g.grantedAt)));
    }
    for (const r of d.releases) {
      this.released.inc({ cluster, reason: r.reason });
      if (r.reason === "RolledBack") {
        const result = machine(r.turn.machine)?.status?.lastTrial?.result ?? "Unknown";
        this.failedTrials.inc({ cluster, result });
      }
    }
  }

  /** One decide() over a Cluster took `ms`. */
  decideTook(cluster: string, ms: number): void {
    this.decideSeconds.observe({ cluster }, ms / 1000);
  }

  channelRead(cluster: string, result: string): void {
    this.channelReads.inc({ cluster, result });
  }

  trustRefused(cluster: string, reason: string, role: string): void {
    this.trustRefusals.inc({ cluster, reason, role });
  }
}

/**
 * status.evidence of each Cluster, one series per release it records (at most 16 a Cluster):
 * what `liken promote` reads, for a dashboard or an alert across the fleet. The soak is
 * `time() - liken_operator_release_first_proven_timestamp_seconds` while not reverted.
 */
function evidenceGauges(view: FleetView, registers: Registry[]): void {
  const each = (
    name: string,
    help: string,
    value: (e: ReleaseEvidence) => number | undefined,
  ): void => {
    new Gauge({
      name,
      help,
      labelNames: ["cluster", "version"],
      registers,
      collect() {
        this.reset();
        for (const c of view.clusters())
          for (const e of c.status?.evidence ?? []) {
            const v = value(e);
            if (v !== undefined) this.set({ cluster: c.metadata.name, version: e.version }, v);
          }
      },
    });
  };
  each(
    "liken_operator_release_proven_machines",
    "The most machines of each Cluster seen running a release Ready at once (status.evidence[].provenMachines).",
    (e) => e.provenMachines,
  );
  each(
    "liken_operator_release_failed_trials",
    "The most machines of each Cluster seen with a failed trial of a release (status.evidence[].failedTrials).",
    (e) => e.failedTrials,
  );
  each(
    "liken_operator_release_first_proven_timestamp_seconds",
    "When the first machine of each Cluster was seen running a release Ready (Unix time; status.evidence[].firstProvenAt).",
    (e) => (e.firstProvenAt === undefined ? undefined : Date.parse(e.firstProvenAt) / 1000),
  );
  each(
    "liken_operator_release_reverted",
    "1 when the Cluster reverted away from the release (status.evidence[].revertedAt), 0 otherwise.",
    (e) => (e.revertedAt === undefined ? 0 : 1),
  );
  each(
    "liken_operator_release_recalled",
    "1 when the operator saw the channel recall the release (status.evidence[].recalledAt), 0 otherwise.",
    (e) => (e.recalledAt === undefined ? 0 : 1),
  );
}
