// The columns of `kubectl get clusters` (-o wide), pure: phase, MACHINES, VERSION (oldest
// running), NEWEST, LEADERS, ENDPOINT, and the counts behind the budget.
import {
  LEADERS_MAX_ITEMS,
  type Cluster,
  type ClusterStatus,
  type Machine,
  type RebootTurn,
} from "../../api/index.js";
import { newest, oldest } from "../../release-decision/version-order.js";
import { isHeld, targetOf } from "../view/machine-view.js";

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
  // (src/release-decision/view.ts); with follow there is no spec.version, and a refused channel still shows
  // how far the fleet got.
  const target =
    targetOf(cluster)?.version ?? cluster.spec.version ?? cluster.status?.trust?.newest?.version;
  const { running, unavailable, ready, held, everyoneThere, leaderNames } = tally(
    machines,
    turns,
    lost,
    target,
  );
  const phase =
    target === undefined || machines.length === 0
      ? "Pending"
      : turns.length > 0 || !everyoneThere
        ? "Updating"
        : "Ready";
  const leaders = leaderNames.sort().slice(0, LEADERS_MAX_ITEMS);
  const summary: Summary = {
    phase,
    // Held machines counted apart: "9/11, 1 held" (the rollout is done without them).
    machines:
      held === 0
        ? `${ready}/${machines.length}`
        : `${ready}/${machines.length - held}, ${held} held`,
    counts: { total: machines.length, ready, unavailable, lost: lost.size },
    leaders,
  };
  const versions = [...running];
  const v = oldest(versions);
  const n = newest(versions);
  if (v !== undefined) summary.version = v;
  if (n !== undefined) summary.newest = n;
  if (endpoint !== undefined) summary.endpoint = endpoint;
  return summary;
}

interface Tally {
  running: Set<string>;
  unavailable: number;
  ready: number;
  /** Machines a person holds at their release (spec.hold), not on the target. */
  held: number;
  everyoneThere: boolean;
  leaderNames: string[];
}

/** The counts behind the columns, in one pass over the fleet (every decision, up to 5,000). */
function tally(
  machines: readonly Machine[],
  turns: readonly RebootTurn[],
  lost: ReadonlySet<string>,
  target: string | undefined,
): Tally {
  const running = new Set<string>();
  const down = new Set<string>(turns.map((t) => t.machine));
  for (const name of lost) down.add(name);
  let ready = 0;
  const standings = { there: 0, behind: 0, held: 0 };
  const leaderNames: string[] = [];
  for (const m of machines) {
    const s = m.status;
    const name = m.metadata.name;
    if (s?.version) running.add(s.version);
    if (target !== undefined && s?.version === target && s.step === "Ready" && !lost.has(name)) {
      ready++;
    }
    if (s?.step === "Updating") down.add(name);
    standings[standing(m, target)]++;
    if (m.spec.role === "Leader") leaderNames.push(name);
  }
  const { held, behind } = standings;
  return { running, unavailable: down.size, ready, held, everyoneThere: behind === 0, leaderNames };
}

/**
 * Where a machine stands against the target: on it, behind it, or held at its release by a
 * person (spec.hold), which does not keep the rollout open: MACHINES counts it apart.
 */
function standing(m: Machine, target: string | undefined): "there" | "behind" | "held" {
  if (m.status?.version === target) return "there";
  return isHeld(m) ? "held" : "behind";
}
