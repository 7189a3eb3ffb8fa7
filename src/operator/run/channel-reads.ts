// The channel reads of each Cluster: started by a pass when one is due (channel/poll.ts), run
// beside the passes (a read waits on the network; a pass must not), and their result held until
// the status write that carries it. A signed channel's verdict is counted and announced here.
// At most one read per Cluster is in flight, and none starts while a view waits to be written.
import type { Cluster } from "../../api/index.js";
import { trustModeOf } from "../../release-decision/view.js";
import { pollDue, readChannel, type PollState } from "../channel/poll.js";
import { readTrust } from "../channel/trust.js";
import type { ChannelView } from "../decide/decide.js";
import type { Logger } from "../logger.js";
import type { Announcer } from "./announce.js";
import type { Clocks } from "./liveness.js";
import type { OperatorMetrics } from "./metrics.js";

export interface ChannelReadsParts {
  /** How often a Cluster's channel is read without the annotation asking (ms). */
  intervalMs: number;
  /** This copy's clocks: the trust read judges expiry on its wall clock. */
  clocks: Clocks;
  log: Logger;
  metrics: OperatorMetrics;
  announcer: Announcer;
  /** Decide this Cluster again (a read ended). */
  schedule: (cluster: string) => void;
}

export class ChannelReads {
  private readonly views = new Map<string, ChannelView>();
  private readonly polls = new Map<string, PollState & { inFlight?: boolean }>();

  constructor(private readonly parts: ChannelReadsParts) {}

  /** The view read since the last status write of this Cluster, if any. */
  view(name: string): ChannelView | undefined {
    return this.views.get(name);
  }

  /** A channel view is used once: by the status write that carries it, or found already there. */
  spend(name: string, channel: ChannelView | undefined): void {
    if (channel !== undefined && this.views.get(name) === channel) {
      this.views.delete(name);
    }
  }

  /** The Cluster was deleted. */
  forget(name: string): void {
    this.views.delete(name);
    this.polls.delete(name);
  }

  /** Starts a channel read when one is due; its result joins the next status write. */
  maybePoll(cluster: Cluster): void {
    const { log, metrics, schedule } = this.parts;
    const name = cluster.metadata.name;
    const state = this.polls.get(name) ?? {};
    this.polls.set(name, state);
    if (state.inFlight || this.views.has(name)) return;
    const due = pollDue(cluster, state, new Date(), this.parts.intervalMs);
    if (!due.due) return;
    state.inFlight = true;
    state.lastPollAt = new Date();
    const read = trustModeOf(cluster) === "pinned" ? readChannel : readTrust;
    // The trust read judges expiry on this copy's wall clock (the test seam moves it).
    read(cluster, () => new Date(this.parts.clocks.wall()))
      .then((view) => {
        metrics.channelRead(name, view.condition.reason);
        this.noteTrust(cluster, view);
        this.views.set(name, view);
        if (view.condition.status !== "True") {
          log.warn({ cluster: name }, view.condition.message);
        }
      })
      .catch((e: unknown) => {
        metrics.channelRead(name, "Error");
        log.error({ cluster: name, err: String(e) }, "channel");
      })
      .finally(() => {
        state.inFlight = false;
        schedule(name);
      });
  }

  /**
   * A signed channel's verdict, counted and announced: a refusal is counted every read (the
   * metric), an Event when the verdict changes (not every poll).
   */
  private noteTrust(cluster: Cluster, view: ChannelView): void {
    const t = view.trust;
    if (t === undefined) return;
    const name = cluster.metadata.name;
    const metrics = this.parts.metrics;
    if (t.fault !== undefined) metrics.trustRefused(name, t.fault.reason, t.fault.role);
    else if (t.condition.status === "False")
      metrics.trustRefused(name, t.condition.reason, "targets");
    const old = cluster.status?.conditions?.find((c) => c.type === "ChannelTrusted");
    if (old?.status === t.condition.status && old.reason === t.condition.reason) return;
    const good = t.condition.status === "True";
    if (!good) this.parts.log.warn({ cluster: name }, t.condition.message);
    this.parts.announcer.event(
      cluster,
      good ? "Normal" : "Warning",
      good ? "ChannelTrusted" : "ChannelDistrusted",
      `${t.condition.reason}: ${t.condition.message}`,
    );
  }
}
