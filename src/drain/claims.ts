// What the drain reads from resource.k8s.io/v1 ResourceClaims: which driver serves a claim,
// who holds it (status.reservedFor), and whether its allocation ties it to one node.
import type { V1Pod, ResourceV1ResourceClaim } from "@kubernetes/client-node";
import { claimNamesOf, refOf, uidOf } from "./pods.js";

export interface Consumer {
  resource: string;
  name: string;
  uid: string;
}

/** The drivers named by the claim's allocation results (status.allocation.devices.results). */
export function driversOf(claim: ResourceV1ResourceClaim): string[] {
  const drivers = new Set<string>();
  for (const r of claim.status?.allocation?.devices?.results ?? []) drivers.add(r.driver);
  return [...drivers];
}

export function consumersOf(claim: ResourceV1ResourceClaim): Consumer[] {
  return (claim.status?.reservedFor ?? []).map((c) => ({
    resource: c.resource,
    name: c.name,
    uid: c.uid,
  }));
}

/**
 * Whether the allocation can only be used on `node`: the scheduler writes
 * `nodeSelectorTerms: [{matchFields: [{key: metadata.name, operator: In, values: [node]}]}]`
 * for devices from a node-local ResourceSlice. Every consumer of such a claim runs on `node`.
 */
export function isAllocatedOnlyTo(claim: ResourceV1ResourceClaim, node: string): boolean {
  const terms = claim.status?.allocation?.nodeSelector?.nodeSelectorTerms ?? [];
  if (terms.length === 0) return false;
  return terms.every((t) =>
    (t.matchFields ?? []).some(
      (f) =>
        f.key === "metadata.name" &&
        f.operator === "In" &&
        f.values?.length === 1 &&
        f.values[0] === node,
    ),
  );
}

/**
 * The claims that concern this node: allocated to it alone, reserved by a pod seen on it, or
 * named by such a pod. `nodePodUids` are the UIDs of every pod seen on the node during the
 * drain (a claim must not drop out of view the moment its last holder is gone).
 */
export function claimsOnNode(
  claims: readonly ResourceV1ResourceClaim[],
  node: string,
  nodePods: readonly V1Pod[],
  nodePodUids: ReadonlySet<string>,
): ResourceV1ResourceClaim[] {
  const named = new Set<string>();
  for (const pod of nodePods) {
    for (const n of claimNamesOf(pod)) named.add(`${pod.metadata?.namespace ?? ""}/${n}`);
  }
  return claims.filter(
    (c) =>
      isAllocatedOnlyTo(c, node) ||
      named.has(refOf(c)) ||
      consumersOf(c).some((u) => nodePodUids.has(u.uid)),
  );
}

/**
 * The consumers that keep the driver on this node busy with `claim`: all of them when the
 * claim is allocated to this node alone, else those that run (or ran) here; a consumer on
 * another node is served by the driver on that node.
 */
export function localConsumers(
  claim: ResourceV1ResourceClaim,
  node: string,
  nodePodUids: ReadonlySet<string>,
): Consumer[] {
  const all = consumersOf(claim);
  return isAllocatedOnlyTo(claim, node) ? all : all.filter((c) => nodePodUids.has(c.uid));
}

/** Map pod UID -> refs of the claims whose reservedFor lists it, plus the claims it names. */
export function claimsHeldBy(
  pod: V1Pod,
  claims: readonly ResourceV1ResourceClaim[],
): ResourceV1ResourceClaim[] {
  const ns = pod.metadata?.namespace ?? "";
  const names = new Set(claimNamesOf(pod));
  const uid = uidOf(pod);
  return claims.filter(
    (c) =>
      (c.metadata?.namespace === ns && names.has(c.metadata?.name ?? "")) ||
      consumersOf(c).some((u) => u.uid === uid),
  );
}
