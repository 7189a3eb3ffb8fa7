// "Rejoined" means this boot, pure: whether the Node the agent reads was posted by the kubelet of
// THIS boot. The API server keeps the last status a kubelet posted until the node controller
// marks a silent Node Unknown, about 50 s after its last heartbeat (node-monitor-grace-period),
// while the agent of a trial boot is up and looking within 30-40 s. A Ready=True read then can
// be the previous boot's, and a release whose kubelet never starts would be promoted on it.
// So the trial counts as rejoined only when the Node's status.nodeInfo.bootID is this boot's
// id (/proc/sys/kernel/random/boot_id, the same value the kubelet reports) and its Ready
// condition is True with a heartbeat after this boot started.
//
// Three outcomes, because a failure to look is not a verdict on the release:
//   - rejoined: promote (after the health gates);
//   - not-rejoined: the Node was read and is not this boot's (or not Ready since it);
//   - unread: the API server or the Node could not be read, so nothing is known.

/** What the agent read of its Node: the parts that name a boot. */
export interface NodeSeen {
  /** status.nodeInfo.bootID as the kubelet posted it ("" when the Node carries none). */
  bootId: string;
  /** The Ready condition, if the Node has one. */
  ready?: { status: string; heartbeatAt?: number };
}

/**
 * How much earlier than the computed boot start a heartbeat may be and still count as this
 * boot's: lastHeartbeatTime has whole seconds (RFC 3339 without fraction, truncated), and the
 * boot start is computed from /proc/uptime (10 ms steps) against the wall clock, so up to one
 * second of truncation plus the rounding; two seconds covers both with room.
 */
export const HEARTBEAT_SLACK_MS = 2_000;

/** What the agent knows of the Node on this trial boot. */
export interface RejoinLook {
  apiReachable: boolean;
  /** Why the Node could not be read (a 403, a failed watch); undefined: it was read. */
  nodeUnread: string | undefined;
  /** The Node as read; undefined: there is no Node of that name. */
  node: NodeSeen | undefined;
  nodeName: string;
  /** This boot's id. */
  bootId: string;
  /** When this boot started, wall clock ms (Date.now() minus the time since boot). */
  bootStartedAt: number;
}

export type Rejoin =
  | { kind: "rejoined" }
  /** Read, and not this boot's: a verdict. `seen` is the bootID the Node showed ("" none). */
  | { kind: "not-rejoined"; seen: string | undefined; why: string }
  /** Nothing read: no verdict. */
  | { kind: "unread"; why: string };

export function rejoinOf(l: RejoinLook): Rejoin {
  if (!l.apiReachable) return { kind: "unread", why: "API server not reachable" };
  if (l.nodeUnread !== undefined) {
    return { kind: "unread", why: `cannot read Node ${l.nodeName}: ${l.nodeUnread}` };
  }
  const n = l.node;
  if (n === undefined) {
    return { kind: "not-rejoined", seen: undefined, why: `Node ${l.nodeName} does not exist` };
  }
  if (n.bootId !== l.bootId) {
    const shown = n.bootId === "" ? "no bootID" : `bootID ${n.bootId}`;
    const why = `Node ${l.nodeName} shows ${shown}, not this boot's ${l.bootId}`;
    return { kind: "not-rejoined", seen: n.bootId, why };
  }
  const r = n.ready;
  if (r?.status !== "True") {
    const why = `Node ${l.nodeName} shows this boot's id but Ready is ${r?.status ?? "missing"}`;
    return { kind: "not-rejoined", seen: n.bootId, why };
  }
  if (r.heartbeatAt === undefined || r.heartbeatAt < l.bootStartedAt - HEARTBEAT_SLACK_MS) {
    const at = r.heartbeatAt === undefined ? "none" : new Date(r.heartbeatAt).toISOString();
    const boot = new Date(l.bootStartedAt).toISOString();
    const why = `Node ${l.nodeName} is Ready with a heartbeat (${at}) from before this boot (${boot})`;
    return { kind: "not-rejoined", seen: n.bootId, why };
  }
  return { kind: "rejoined" };
}

/** The most other-boot ids a trial remembers: enough to name them, bounded for the status. */
export const SEEN_BOOT_IDS_MAX = 3;

/** The bootIDs seen on the Node during this trial (newest last, each once, bounded). */
export function withSeen(list: readonly string[] | undefined, id: string): string[] {
  const rest = (list ?? []).filter((x) => x !== id);
  return [...rest, id].slice(-SEEN_BOOT_IDS_MAX);
}

/** A bootID for a message: "" is a Node that never had one. */
export function bootIdText(id: string): string {
  return id === "" ? "(none)" : id;
}
