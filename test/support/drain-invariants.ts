// The drain's promises, checked on an independent record of what the API server did (every
// watch event on the pods and ResourceClaims of a test namespace). Pure, so that a unit test
// can show each check fails on a log that breaks it.
//
// Ordering: events of both watches are merged by resourceVersion. The test control plane
// has one etcd, whose revision every resourceVersion is, so the numbers order writes across
// resources exactly. (Clients must treat resourceVersion as opaque; a test may rely on its
// own single-etcd setup.)
import type { ResourceV1ResourceClaim, V1Pod } from "@kubernetes/client-node";

export interface Recorded {
  type: "ADDED" | "MODIFIED" | "DELETED";
  kind: "Pod" | "ResourceClaim";
  rv: number;
  obj: V1Pod | ResourceV1ResourceClaim;
}

export interface Budget {
  name: string;
  /** The pod labels the budget selects (matchLabels). */
  labels: Record<string, string>;
  minHealthy: number;
}

export interface Expectations {
  node: string;
  /** UIDs of the driver pods on `node` when the drain started, with the driver each runs. */
  drivers: { uid: string; driver: string }[];
  budgets: Budget[];
}

const nameOf = (o: { metadata?: { name?: string } }) => o.metadata?.name ?? "?";

function isHealthy(p: V1Pod): boolean {
  return (
    p.metadata?.deletionTimestamp == null &&
    (p.status?.conditions ?? []).some((c) => c.type === "Ready" && c.status === "True")
  );
}

function allocatedTo(c: ResourceV1ResourceClaim, node: string): boolean {
  return (c.status?.allocation?.nodeSelector?.nodeSelectorTerms ?? []).some((t) =>
    (t.matchFields ?? []).some((f) => f.key === "metadata.name" && f.values?.includes(node)),
  );
}

function servedBy(c: ResourceV1ResourceClaim, driver: string): boolean {
  return (c.status?.allocation?.devices?.results ?? []).some((r) => r.driver === driver);
}

interface State {
  pods: Map<string, V1Pod>; // uid -> latest
  gone: Set<string>; // pod uids DELETED
  left: Set<string>; // pod uids that started to leave
  claims: Map<string, ResourceV1ResourceClaim>; // uid -> latest; deleted ones removed
  holders: Map<string, Set<string>>; // driver -> uids of the pods that held its claims here
}

/** Every broken promise in the log, in words; empty when the drain kept them all. */
export function violations(log: readonly Recorded[], exp: Expectations): string[] {
  const st: State = {
    pods: new Map(),
    gone: new Set(),
    left: new Set(),
    claims: new Map(),
    holders: new Map(),
  };
  const out: string[] = [];
  for (const e of [...log].sort((a, b) => a.rv - b.rv)) {
    if (e.kind === "ResourceClaim") recordClaim(st, e, exp);
    else out.push(...recordPod(st, e, exp));
  }
  return out;
}

function recordClaim(st: State, e: Recorded, exp: Expectations): void {
  const c = e.obj as ResourceV1ResourceClaim;
  const uid = c.metadata?.uid ?? "";
  if (e.type === "DELETED") st.claims.delete(uid);
  else st.claims.set(uid, c);
  for (const d of exp.drivers) {
    if (!servedBy(c, d.driver) || !allocatedTo(c, exp.node)) continue;
    const set = st.holders.get(d.driver) ?? new Set<string>();
    for (const r of c.status?.reservedFor ?? []) set.add(r.uid);
    st.holders.set(d.driver, set);
  }
}

function recordPod(st: State, e: Recorded, exp: Expectations): string[] {
  const p = e.obj as V1Pod;
  const uid = p.metadata?.uid ?? "";
  const before = st.pods.get(uid);
  const leaving =
    !st.left.has(uid) && (e.type === "DELETED" || p.metadata?.deletionTimestamp != null);
  if (e.type === "DELETED") {
    st.gone.add(uid);
    st.pods.delete(uid);
  } else {
    st.pods.set(uid, p);
  }
  if (!leaving) return [];
  st.left.add(uid);
  const out: string[] = [];
  const driver = exp.drivers.find((d) => d.uid === uid);
  if (driver !== undefined) out.push(...driverLeft(driver, nameOf(p), st, exp));
  if (before !== undefined && isHealthy(before)) out.push(...budgetsAfter(st.pods, exp, nameOf(p)));
  return out;
}

function driverLeft(
  driver: { uid: string; driver: string },
  name: string,
  st: State,
  exp: Expectations,
): string[] {
  const out: string[] = [];
  for (const h of st.holders.get(driver.driver) ?? []) {
    if (!st.gone.has(h)) {
      out.push(`driver pod ${name} left while claim holder ${h} was still on the API server`);
    }
  }
  for (const c of st.claims.values()) {
    if (!servedBy(c, driver.driver) || !allocatedTo(c, exp.node)) continue;
    const reserved = (c.status?.reservedFor ?? []).map((r) => r.name);
    if (reserved.length > 0) {
      out.push(
        `driver pod ${name} left while claim ${nameOf(c)} was reserved for ${reserved.join(", ")}`,
      );
    }
  }
  return out;
}

function budgetsAfter(pods: Map<string, V1Pod>, exp: Expectations, name: string): string[] {
  const out: string[] = [];
  for (const b of exp.budgets) {
    const healthy = [...pods.values()].filter(
      (p) =>
        isHealthy(p) && Object.entries(b.labels).every(([k, v]) => p.metadata?.labels?.[k] === v),
    ).length;
    if (healthy < b.minHealthy) {
      out.push(
        `budget ${b.name}: ${healthy} healthy pods after ${name} left, minimum ${b.minHealthy}`,
      );
    }
  }
  return out;
}
