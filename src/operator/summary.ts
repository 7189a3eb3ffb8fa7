// The columns of `kubectl get clusters` (-o wide), pure: phase, MACHINES, VERSION (oldest
// running), NEWEST, LEADERS, ENDPOINT, and the counts behind the budget.
import {
  LEADERS_MAX_ITEMS,
  type Cluster,
  type ClusterStatus,
  type Machine,
  type RebootTurn,
} from "../api/index.js";
import { newest, oldest } from "./version-order.js";
import { targetOf } from "./machine-view.js";

export type Summary = Required<Pick<ClusterStatus, "phase" | "machines" | "counts" | "leaders">> &
  Pick<ClusterStatus, "version" | "newest" | "endpoint">;

export function summarize(
  cluster: Cluster,
  machines: readonly Machine[],
  turns: readonly RebootTurn[],
  lost: ReadonlySet<string>,
  endpoint: string | undefined,
): Summary {
  // The fleet's target: spec.version's (in the Cluster's trust mode), or a revert's
  // (src/api/target.ts); with follow there is no spec.version, and a refused channel still shows
  // how far the fleet got.
  const target =
    targetOf(cluster)?.version ?? cluster.spec.version ?? cluster.status?.trust?.newest?.version;
  const running = machines.flatMap((m) => (m.status?.version ? [m.status.version] : []));
  const ready = machines.filter(
    (m) =>
      target !== undefined &&
      m.status?.version === target &&
      m.status.step === "Ready" &&
      !lost.has(m.metadata.name),
  ).length;
  const unavailable = new Set([
    ...turns.map((t) => t.machine),
    ...lost,
    ...machines.filter((m) => m.status?.step === "Updating").map((m) => m.metadata.name),
  ]).size;
  const everyoneThere = machines.every((m) => m.status?.version === target);
  const phase =
    target === undefined || machines.length === 0
      ? "Pending"
      : turns.length > 0 || !everyoneThere
        ? "Updating"
        : "Ready";
  const leaders = machines
    .filter((m) => m.spec.role === "Leader")
    .map((m) => m.metadata.name)
    .sort()
    .slice(0, LEADERS_MAX_ITEMS);
  const summary: Summary = {
    phase,
    machines: `${ready}/${machines.length}`,
    counts: { total: machines.length, ready, unavailable, lost: lost.size },
    leaders,
  };
  const v = oldest(running);
  const n = newest(running);
  if (v !== undefined) summary.version = v;
  if (n !== undefined) summary.newest = n;
  if (endpoint !== undefined) summary.endpoint = endpoint;
  return summary;
}
