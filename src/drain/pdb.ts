// Which PodDisruptionBudget holds a pod, and what the API server said when it refused.
import type { V1Pod, V1PodDisruptionBudget } from "@kubernetes/client-node";
import { refOf } from "./pods.js";
import { selectorMatches } from "./selector.js";

/** The budgets in the pod's namespace whose selector matches it (the API server's rule). */
export function budgetsFor(pod: V1Pod, pdbs: readonly V1PodDisruptionBudget[]): string[] {
  const ns = pod.metadata?.namespace;
  return pdbs
    .filter(
      (b) =>
        b.metadata?.namespace === ns &&
        selectorMatches(b.spec?.selector, pod.metadata?.labels ?? {}),
    )
    .map(refOf);
}

/**
 * The human part of a refused eviction: the Status message and its causes, e.g.
 * "Cannot evict pod as it would violate the pod's disruption budget. (The disruption
 * budget web needs 2 healthy pods and has 2 currently)". The client hands the body over
 * as raw text.
 */
export function statusMessage(body: unknown): string {
  let status: unknown = body;
  if (typeof body === "string") {
    try {
      status = JSON.parse(body);
    } catch {
      return body.slice(0, 500);
    }
  }
  if (typeof status !== "object" || status === null) return String(body);
  const s = status as { message?: string; details?: { causes?: { message?: string }[] } };
  const causes = (s.details?.causes ?? []).map((c) => c.message).filter(Boolean);
  return causes.length > 0 ? `${s.message ?? ""} (${causes.join("; ")})` : (s.message ?? "");
}
