// The agent's view of the API: its Machine, its Cluster and its Node, each kept by a watch
// (field selector metadata.name=...) instead of read on every loop. An idle agent then costs
// the API server its heartbeat and nothing else, and a change (a new spec.version, a granted
// turn, an approval) reaches the agent as it happens: `onChange` wakes the loop at once.
//
// A full re-read happens only when a watch fails (the watcher lists again, with a backoff) and
// every RESYNC_MS (below). The view says the API is reachable only while every watch has
// listed and none has failed since, and the last heartbeat got an answer: a server that went
// away silently (a half-open connection a watch cannot notice) is noticed by the next
// heartbeat, within heartbeatSeconds.
import type { Logger } from "pino";
import type { ApiError } from "../api/errors.js";
import { API_ERROR_CODES } from "../api/errors.js";
import type { Cluster, Machine } from "../api/types.js";
import { ResourceWatcher, type WatchEventType } from "../api/watch.js";
import type { AgentApi, NodeView } from "./api.js";
import { nodeSeenOf, trimNode, type Look } from "./look.js";
import type { NodeSeen } from "./rejoin.js";

/**
 * A fresh list of each object this often, even when no watch failed. Why at all: a watch can
 * miss nothing the server sent, but a connection that died without a FIN (a NAT that forgot
 * it, a cable) delivers nothing until TCP keep-alive gives up (minutes); the re-list bounds
 * how long a missed change can stay unseen. Why 10 minutes: three lists per machine per 10
 * minutes is 0.005 requests per second, a twentieth of the heartbeat's 0.1; the heartbeat
 * already catches a dead server within seconds, so this only guards against a silently
 * stuck watch on a live one.
 */
export const RESYNC_MS = 10 * 60_000;

export interface ViewTarget {
  machine: string;
  cluster: string;
  nodeName: string;
}

type Key = "machine" | "cluster" | "node";

export class ApiView {
  private readonly machines: ResourceWatcher<Machine>;
  private readonly clusters: ResourceWatcher<Cluster>;
  private readonly nodes: ResourceWatcher<NodeView>;
  /** Watches that have listed and not failed since. */
  private readonly healthy = new Set<Key>();
  /** The last failure of each watch, kept until it lists again: the cause a person needs. */
  private readonly failures = new Map<Key, ApiError>();
  private heartbeatOk = true;
  /** The Machine as this agent last wrote it (newer than the watch's copy until its event). */
  private written: Machine | undefined;
  /** The Node's readiness and bootID as last seen: only their changes wake the loop. */
  private lastNodeKey = "";

  constructor(
    api: AgentApi,
    private readonly t: ViewTarget,
    private readonly onChange: (why: string) => void,
    private readonly onError: (e: ApiError) => void,
  ) {
    const opts = (name: string) => ({
      fieldSelector: `metadata.name=${name}`,
      resyncMs: RESYNC_MS,
    });
    this.machines = new ResourceWatcher(api.machines, this.handlers("machine"), opts(t.machine));
    this.clusters = new ResourceWatcher(api.clusters, this.handlers("cluster"), opts(t.cluster));
    this.nodes = new ResourceWatcher(api.nodes, this.handlers("node"), {
      ...opts(t.nodeName),
      trim: trimNode,
    });
  }

  private handlers<T extends { metadata: { resourceVersion?: string } }>(key: Key) {
    return {
      onSync: () => {
        this.healthy.add(key);
        this.failures.delete(key);
        this.onChange(`${key} listed`);
      },
      onChange: (ev: { type: WatchEventType; object: T }) => {
        this.healthy.add(key);
        if (key === "machine" && ev.type === "deleted") {
          // Someone deleted the Machine: this agent's last write of it is no Machine any more.
          // Forgotten, the Machine reads as missing and the agent registers it again.
          this.written = undefined;
          this.onChange("machine deleted");
          return;
        }
        if (
          key === "machine" &&
          ev.object.metadata.resourceVersion === this.written?.metadata.resourceVersion
        ) {
          return; // the echo of this agent's own status write
        }
        if (key === "node") {
          // kwok and the kubelet rewrite the Node often (heartbeats); only its readiness and
          // the boot it names matter here (rejoin.ts), and a fresh heartbeat is read at the
          // next tick anyway.
          const n = nodeSeenOf(ev.object as unknown as NodeView);
          const nodeKey = `${n.ready?.status ?? ""}/${n.bootId}`;
          if (nodeKey === this.lastNodeKey) return;
          this.lastNodeKey = nodeKey;
        }
        this.onChange(`${key} changed`);
      },
      onError: (e: ApiError) => {
        this.healthy.delete(key);
        this.failures.set(key, e);
        this.onError(e);
      },
    };
  }

  /** Starts every watch; they list, watch and recover by themselves until stop(). */
  start(): void {
    void this.machines.start();
    void this.clusters.start();
    void this.nodes.start();
  }

  stop(): void {
    this.machines.stop();
    this.clusters.stop();
    this.nodes.stop();
  }

  /** The outcome of each heartbeat: a renewal without an answer means the server is gone. */
  heartbeat(e: unknown): void {
    this.heartbeatOk = (e as ApiError | undefined)?.code !== API_ERROR_CODES.unavailable;
  }

  /**
   * The Machine and the Cluster are watched and the server answers. The Node's watch is not
   * part of it: a Node that cannot be read (a 403) is said as such (`node`), not as an
   * unreachable server.
   */
  get reachable(): boolean {
    return this.healthy.has("machine") && this.healthy.has("cluster") && this.heartbeatOk;
  }

  /** Why the Machine or the Cluster cannot be read now, if a watch said. */
  get failure(): ApiError | undefined {
    return this.failures.get("machine") ?? this.failures.get("cluster");
  }

  /**
   * The Node as its watch has it (undefined: no such Node), or why the watch cannot tell
   * (never "not Ready" for a 403).
   */
  get node(): Look<NodeSeen | undefined> {
    const e = this.failures.get("node");
    if (!this.healthy.has("node") && e !== undefined) return { ok: false, error: e };
    const node = this.nodes.get(this.t.nodeName);
    return { ok: true, value: node === undefined ? undefined : nodeSeenOf(node) };
  }

  /** Listed, and the Machine does not exist (the agent registers it). */
  get machineMissing(): boolean {
    return this.healthy.has("machine") && this.machines.get(this.t.machine) === undefined;
  }

  get machine(): Machine | undefined {
    const seen = this.machines.get(this.t.machine);
    const w = this.written;
    if (w === undefined || seen === undefined) return seen ?? w;
    return Number(w.metadata.resourceVersion) > Number(seen.metadata.resourceVersion) ? w : seen;
  }

  get cluster(): Cluster | undefined {
    return this.clusters.get(this.t.cluster);
  }

  /**
   * A write found the Machine gone (404): forget this agent's copy, so the Machine reads as
   * missing (once the watch agrees) and is registered again instead of written to every tick.
   */
  forgetWritten(): void {
    this.written = undefined;
  }

  /** What the server returned for this agent's own write of its Machine. */
  wrote(m: Machine): void {
    this.written = m;
  }
}

/**
 * The view as the daemon keeps it: `onChange` at each change, and each failed watch logged. No
 * answer or an expired resourceVersion is routine; anything else (a 403) says why.
 */
export function agentView(
  api: AgentApi,
  t: ViewTarget,
  onChange: (why: string) => void,
  log: Pick<Logger, "debug" | "warn">,
): ApiView {
  return new ApiView(api, t, onChange, (e: ApiError) =>
    e.code === API_ERROR_CODES.unavailable || e.code === API_ERROR_CODES.gone
      ? log.debug({ err: e.message, code: e.code }, "watch failed; listing again")
      : log.warn({ err: e.message, code: e.code }, "watch refused; listing again"),
  );
}
