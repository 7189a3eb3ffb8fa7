// liken-agent's Prometheus metrics (docs/metrics.md names each one): bytes downloaded into
// the slot, how long each step took, the last trial's result. One agent runs per process,
// so the registry is the process's: the daemon calls these hooks from where it already logs
// a step's begin and end, and `liken agent run` serves the registry when the config's
// metricsAddress (or --metrics-address) asks for it.
import { Counter, Gauge, Histogram, Registry } from "prom-client";
import { collectProcessMetrics } from "../metrics/process.js";
import { TRIAL_RESULTS, type TrialRecord } from "../api/types.js";
import { PEER_FAULTS, type PeerDrop } from "../slots/peer-sources.js";
import type { AgentMeter } from "./meter.js";

/**
 * Step duration buckets, in seconds: a promote or withdraw takes milliseconds; a drain
 * waits on PodDisruptionBudgets for minutes; a download of a few GiB over a slow link
 * takes up to an hour.
 */
const STEP_BUCKETS = [0.01, 0.1, 0.5, 1, 5, 15, 60, 300, 900, 3600];

class AgentMetrics implements AgentMeter {
  readonly registry = new Registry();
  private readonly bytes: Counter;
  private readonly reusedBytes: Counter;
  private readonly fetchedBytes: Counter;
  private readonly steps: Histogram<"step" | "result">;
  private readonly refusedChunks: Counter<"reason">;
  private readonly droppedPeers: Counter<"reason">;
  private readonly servedBytes: Counter;
  private lastTrial: () => TrialRecord | undefined = () => undefined;

  constructor() {
    const registers = [this.registry];
    this.bytes = new Counter({
      name: "liken_agent_downloaded_bytes_total",
      help: "Artifact bytes this agent wrote (durably) into its inactive slot.",
      registers,
    });
    this.reusedBytes = new Counter({
      name: "liken_agent_download_reused_bytes_total",
      help: "Bytes adaptive downloads copied from this machine's own slots instead of fetching them (each chunk checked against the release's chunk index).",
      registers,
    });
    this.fetchedBytes = new Counter({
      name: "liken_agent_download_fetched_bytes_total",
      help: "Bytes this agent's downloads received from the channel (artifacts and chunk indexes).",
      registers,
    });
    this.steps = new Histogram({
      name: "liken_agent_step_duration_seconds",
      help: "How long each step of the agent took (download, drain, arm trial, promote, ...), by result (ok, failed).",
      labelNames: ["step", "result"],
      buckets: STEP_BUCKETS,
      registers,
    });
    this.refusedChunks = new Counter({
      name: "liken_peer_chunks_refused_total",
      help: `Chunks this agent's downloads refused from a peer, by why (${PEER_FAULTS.join(", ")}): each was fetched from another peer or the channel, and the peer dropped for that release.`,
      labelNames: ["reason"],
      registers,
    });
    this.droppedPeers = new Counter({
      name: "liken_peers_dropped_total",
      help: `Peers this agent's downloads dropped for a release, by why (${PEER_FAULTS.join(", ")}), whether on a chunk or on a chunk index.`,
      labelNames: ["reason"],
      registers,
    });
    this.servedBytes = new Counter({
      name: "liken_peer_served_bytes_total",
      help: "Bytes this machine's peer server sent to its peers (chunks and chunk indexes), paced by spec.peers.maxUploadBytesPerSecond.",
      registers,
    });
    // Every reason has a series from the start, so rate() and alerts see the first refusal.
    for (const reason of PEER_FAULTS) {
      this.refusedChunks.inc({ reason }, 0);
      this.droppedPeers.inc({ reason }, 0);
    }
    const trial = (): TrialRecord | undefined => this.lastTrial();
    new Gauge({
      name: "liken_agent_last_trial",
      help: `1 for the result of this machine's last trial (${TRIAL_RESULTS.join(", ")}), 0 for the others; no series before its first trial.`,
      labelNames: ["result", "version"],
      registers,
      collect() {
        this.reset();
        const t = trial();
        if (t === undefined) return;
        for (const r of TRIAL_RESULTS)
          this.set({ result: r, version: t.version }, r === t.result ? 1 : 0);
      },
    });
    new Gauge({
      name: "liken_agent_last_trial_timestamp_seconds",
      help: "When this machine's last trial ended (Unix time).",
      registers,
      collect() {
        this.reset();
        const t = trial();
        if (t !== undefined) this.set(Date.parse(t.at) / 1000);
      },
    });
    // Sampled every 5 s, as often as the loop turns: each sample wakes the process (the default
    // 10 ms would be the idle agent's largest CPU cost; 1 s was a third of its wake-ups).
    collectProcessMetrics(this.registry, { eventLoopPrecisionMs: 5000 });
  }

  /** A download's durable byte count moved from `before` to `now` (never counts backwards). */
  downloaded(before: number, now: number): void {
    if (now > before) this.bytes.inc(now - before);
  }

  reused(n: number): void {
    this.reusedBytes.inc(n);
  }

  fetched(n: number): void {
    this.fetchedBytes.inc(n);
  }

  step(step: string, ms: number, ok: boolean): void {
    this.steps.observe({ step, result: ok ? "ok" : "failed" }, ms / 1000);
  }

  peerDropped(d: PeerDrop): void {
    this.droppedPeers.inc({ reason: d.fault });
    if (d.chunk !== undefined) this.refusedChunks.inc({ reason: d.fault });
  }

  peerServed(n: number): void {
    this.servedBytes.inc(n);
  }

  /** Where the last trial's record lives (the agent's memory file, as loaded). */
  trialFrom(read: () => TrialRecord | undefined): void {
    this.lastTrial = read;
  }
}

export const agentMetrics = new AgentMetrics();
