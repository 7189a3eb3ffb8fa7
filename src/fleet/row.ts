// One row of `liken fleet status`: what a person scanning many clusters needs of each
// Cluster, decided from the Cluster and its Machines alone (pure; table tests in
// test/unit/fleet-row.test.ts).
import { LABEL_RING, type Cluster, type ClusterCondition, type Machine } from "../api/index.js";
import { targetOf } from "../operator/view/machine-view.js";

/** Progressing reasons that hold a rollout although the condition reads True. */
const HOLDING = new Set([
  "WaitingForApproval",
  "OutsideMaintenanceWindow",
  "CanaryPaused",
  "AwaitingFirstTrial",
  "RolloutPaused",
  "StartupGrace",
]);

/** Conditions in their good state read like this; any other state is worth a look. */
const GOOD: Record<string, string> = {
  ChannelReachable: "True",
  ChannelTrusted: "True",
  SpecValid: "True",
  StatusWriteRefused: "False",
  Reverted: "False",
};

export interface FleetCondition {
  type: string;
  status: string;
  reason: string;
  message: string;
}

export interface ClusterRow {
  context: string;
  /** The Cluster's name. */
  cluster: string;
  ring: string;
  /** The release the Cluster moves to (spec.version, or what the signed channel vouches for). */
  release: string;
  /** Machines that report running `release` now. */
  onRelease: number;
  machines: number;
  /** status.display: the phase, or what holds the rollout. */
  phase: string;
  /** What stops the rollout now, in a few words; "" when nothing does. */
  blocker: string;
  conditions: FleetCondition[];
}

export interface UnreachableRow {
  context: string;
  /** Why the context gave no answer: the error's first line, or the timeout. */
  unreachable: string;
}

export type FleetRow = ClusterRow | UnreachableRow | { context: string; empty: true };

export const isUnreachable = (r: FleetRow): r is UnreachableRow => "unreachable" in r;
export const isClusterRow = (r: FleetRow): r is ClusterRow => "cluster" in r;

const oneLine = (text: string, max = 120): string => {
  const line = text.split("\n")[0]!.trim();
  return line.length > max ? `${line.slice(0, max - 1)}…` : line;
};

/** What stops the rollout, from the conditions and spec.rollout.paused; "" when nothing does. */
export function blockerOf(c: Cluster): string {
  const conds = c.status?.conditions ?? [];
  const parts: string[] = [];
  if (c.spec.rollout?.paused === true) parts.push("paused (liken rollout resume)");
  const p = conds.find((x) => x.type === "Progressing");
  if (p !== undefined && (p.status === "False" || HOLDING.has(p.reason))) {
    if (!(p.reason === "RolloutPaused" && c.spec.rollout?.paused === true))
      parts.push(`${p.reason}: ${oneLine(p.message, 80)}`);
  }
  for (const x of conds) {
    const good = GOOD[x.type];
    if (good !== undefined && x.status !== good) parts.push(`${x.type} ${x.reason}`);
  }
  return parts.join("; ");
}

function conditionOf(x: ClusterCondition): FleetCondition {
  return { type: x.type, status: x.status, reason: x.reason, message: oneLine(x.message, 400) };
}

/**
 * The release the Cluster moves to: what the operator decides on (spec.version, or what the
 * signed channel vouches for), else spec.version as written. A Cluster whose spec the
 * operator's view cannot read (an older CRD, a hand-made object) still gets its row.
 */
function releaseOf(c: Cluster, now?: Date): string {
  try {
    return targetOf(c, now)?.version ?? c.spec.version ?? "";
  } catch {
    return c.spec.version ?? "";
  }
}

/** The row of one Cluster; `machines` may hold other Clusters' Machines too. */
export function clusterRow(
  context: string,
  c: Cluster,
  machines: readonly Machine[],
  now?: Date,
): ClusterRow {
  const own = machines.filter((m) => m.spec.cluster === c.metadata.name);
  const release = releaseOf(c, now);
  return {
    context,
    cluster: c.metadata.name,
    ring: c.metadata.labels?.[LABEL_RING] ?? "",
    release,
    onRelease: release === "" ? 0 : own.filter((m) => m.status?.version === release).length,
    machines: own.length,
    phase: c.status?.display ?? c.status?.phase ?? "",
    blocker: blockerOf(c),
    conditions: (c.status?.conditions ?? []).map(conditionOf),
  };
}

/** The rows of one context: a row per Cluster, or one saying it holds none. */
export function contextRows(
  context: string,
  clusters: readonly Cluster[],
  machines: readonly Machine[],
  now?: Date,
): FleetRow[] {
  if (clusters.length === 0) return [{ context, empty: true }];
  return clusters
    .map((c) => clusterRow(context, c, machines, now))
    .sort((a, b) => a.cluster.localeCompare(b.cluster));
}
