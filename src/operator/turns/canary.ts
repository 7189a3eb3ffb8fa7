// The canary, pure: the first turns of a new release go to a few machines, and once they are
// back and Ready, granting pauses until a person says go on (`liken rollout continue`) or
// the canaries stayed Ready for spec.rollout.canary.soakSeconds.
//
// The canary's memory is status.canary (operator-owned): which machines got the first turns
// of exactly this release (version and digest), when they were all back and Ready (on the
// operator's clock), and when it passed. A new target starts a new canary.
//
// Canaries are workers; leaders only when the cluster has no workers (a leader's reboot
// costs the datastore a member, the worst place to learn that a release is bad).
import type { CanaryStatus, Cluster, Machine, RebootTurn, ReleaseRef } from "../../api/index.js";
import { isLeader } from "../view/machine-view.js";
import { rfc3339 } from "../../api/time.js";

export type CanaryGate =
  /** No canary, or it passed: the page's rules alone decide. */
  | { kind: "open" }
  /** Picking: only these machines may get a turn, at most `left` more. */
  | { kind: "only"; pool: ReadonlySet<string>; left: number }
  /** The canaries are still on their way back: no other turn. */
  | { kind: "running"; machines: string[] }
  /** Back and Ready: paused until continued, or until `until` when a soak is set. */
  | { kind: "paused"; machines: string[]; readyAt: string; until?: Date };

export interface CanaryView {
  /** status.canary to record (undefined: none configured or no target). */
  status: CanaryStatus | undefined;
  gate: CanaryGate;
}

const same = (a: ReleaseRef, b: ReleaseRef): boolean =>
  a.version === b.version && a.digest === b.digest;

export function canaryOf(
  cluster: Cluster,
  machines: readonly Machine[],
  turns: readonly RebootTurn[],
  target: ReleaseRef | undefined,
  now: Date,
): CanaryView {
  const cfg = cluster.spec.rollout?.canary;
  if (cfg === undefined || target === undefined)
    return { status: undefined, gate: { kind: "open" } };
  const recorded = cluster.status?.canary;
  const rec: CanaryStatus =
    recorded !== undefined && same(recorded, target)
      ? recorded
      : { version: target.version, digest: target.digest, machines: [] };
  if (rec.passedAt !== undefined) return { status: rec, gate: { kind: "open" } };

  const workers = machines.filter((m) => !isLeader(m));
  const pool = workers.length > 0 ? workers : machines;
  const chosen = new Set(rec.machines);
  const pickable = pool.filter(
    (m) => !chosen.has(m.metadata.name) && m.status?.version !== target.version,
  );
  const need = Math.min(cfg.machines, rec.machines.length + pickable.length);
  if (need === 0) {
    // Every possible canary already runs the release: nothing left to learn from one.
    return { status: { ...rec, passedAt: rfc3339(now) }, gate: { kind: "open" } };
  }
  if (rec.machines.length < need) {
    const names = new Set(pickable.map((m) => m.metadata.name));
    return { status: rec, gate: { kind: "only", pool: names, left: need - rec.machines.length } };
  }

  if (!allBack(rec.machines, machines, turns, target)) {
    const { readyAt: _was, ...left } = rec; // not (or no longer) all back: the wait restarts
    return { status: left, gate: { kind: "running", machines: rec.machines } };
  }
  return pauseOf(cluster, rec, target, now);
}

/** Every canary is back on the release, Ready, and holds no turn (its soak is over). */
function allBack(
  names: readonly string[],
  machines: readonly Machine[],
  turns: readonly RebootTurn[],
  target: ReleaseRef,
): boolean {
  const holding = new Set(turns.map((t) => t.machine));
  return names.every((name) => {
    const m = machines.find((x) => x.metadata.name === name);
    return m?.status?.version === target.version && m.status.step === "Ready" && !holding.has(name);
  });
}

/** The canaries are back: passed (continued, or soaked long enough) or paused. */
function pauseOf(cluster: Cluster, rec: CanaryStatus, target: ReleaseRef, now: Date): CanaryView {
  const soak = cluster.spec.rollout?.canary?.soakSeconds;
  const readyAt = rec.readyAt ?? rfc3339(now);
  const cont = cluster.spec.rollout?.canaryContinue;
  const until = soak === undefined ? undefined : new Date(Date.parse(readyAt) + soak * 1000);
  if ((cont !== undefined && same(cont, target)) || (until !== undefined && now >= until)) {
    return { status: { ...rec, readyAt, passedAt: rfc3339(now) }, gate: { kind: "open" } };
  }
  return {
    status: { ...rec, readyAt },
    gate: {
      kind: "paused",
      machines: rec.machines,
      readyAt,
      ...(until === undefined ? {} : { until }),
    },
  };
}

/** status.canary after this decision's grants: the granted canaries join the list. */
export function withCanaryGrants(
  status: CanaryStatus | undefined,
  gate: CanaryGate,
  grants: readonly RebootTurn[],
): CanaryStatus | undefined {
  if (status === undefined || gate.kind !== "only" || grants.length === 0) return status;
  return { ...status, machines: [...status.machines, ...grants.map((g) => g.machine)] };
}
