// What the drain needs to know about one pod, read from its object alone.
import type { V1Pod } from "@kubernetes/client-node";
import { posix } from "node:path";

/** `namespace/name`: how the drain names a pod (or any namespaced object) to people. */
export function refOf(obj: { metadata?: { namespace?: string; name?: string } }): string {
  return `${obj.metadata?.namespace ?? ""}/${obj.metadata?.name ?? ""}`;
}

export function uidOf(pod: V1Pod): string {
  return pod.metadata?.uid ?? "";
}

/** The annotation the kubelet puts on the API mirror of a static pod (kubectl drain leaves them). */
export const MIRROR_POD_ANNOTATION = "kubernetes.io/config.mirror";

export function isMirrorPod(pod: V1Pod): boolean {
  return Object.hasOwn(pod.metadata?.annotations ?? {}, MIRROR_POD_ANNOTATION);
}

export function isDaemonSetPod(pod: V1Pod): boolean {
  return (pod.metadata?.ownerReferences ?? []).some(
    (o) => o.controller === true && o.kind === "DaemonSet",
  );
}

/** Succeeded or Failed: nothing runs in it, the reboot changes nothing for it. */
export function isFinished(pod: V1Pod): boolean {
  const phase = pod.status?.phase;
  return phase === "Succeeded" || phase === "Failed";
}

export function isTerminating(pod: V1Pod): boolean {
  return pod.metadata?.deletionTimestamp != null;
}

/**
 * The two priority classes every cluster has for what other pods depend on, and the
 * priority value from which the scheduler counts a pod as system-critical
 * (scheduling.SystemCriticalPriority = 2 * 10^9 in k8s.io/api). Karpenter orders its drain
 * by the same classes (pkg/controllers/node/termination/terminator).
 */
export const CRITICAL_PRIORITY_CLASSES: ReadonlySet<string> = new Set([
  "system-cluster-critical",
  "system-node-critical",
]);
export const SYSTEM_CRITICAL_PRIORITY = 2_000_000_000;

export function isCritical(pod: V1Pod): boolean {
  const cls = pod.spec?.priorityClassName;
  if (cls !== undefined && CRITICAL_PRIORITY_CLASSES.has(cls)) return true;
  return (pod.spec?.priority ?? 0) >= SYSTEM_CRITICAL_PRIORITY;
}

/** The names (in the pod's namespace) of the ResourceClaims the pod's spec and status name. */
export function claimNamesOf(pod: V1Pod): string[] {
  const names = new Set<string>();
  for (const c of pod.spec?.resourceClaims ?? []) {
    if (c.resourceClaimName) names.add(c.resourceClaimName);
  }
  // Claims made from a ResourceClaimTemplate get a generated name, recorded only here.
  for (const s of pod.status?.resourceClaimStatuses ?? []) {
    if (s.resourceClaimName) names.add(s.resourceClaimName);
  }
  return [...names];
}

/** The hostPath volumes of the pod, normalized (no trailing slash, no `..`). */
export function hostPathsOf(pod: V1Pod): string[] {
  const paths: string[] = [];
  for (const v of pod.spec?.volumes ?? []) {
    const p = v.hostPath?.path;
    if (p !== undefined && p.startsWith("/")) paths.push(normalizePath(p));
  }
  return paths;
}

export function normalizePath(p: string): string {
  const n = posix.normalize(p);
  return n.length > 1 && n.endsWith("/") ? n.slice(0, -1) : n;
}

/** Whether `path` is `dir` or lies beneath it. */
export function isWithin(path: string, dir: string): boolean {
  return path === dir || path.startsWith(dir === "/" ? "/" : `${dir}/`);
}
