// Out of the external load balancers before the drain (Cluster spec.disruption.
// excludeFromLoadBalancersSeconds): with its cordon, liken labels the Node
// node.kubernetes.io/exclude-from-external-load-balancers, which the service controller reads to
// take the node out of every load balancer's pool, and the drain waits before its first
// eviction so that open connections finish (bottlerocket-update-operator does the same). Like
// the cordon, liken marks the label it sets and removes only that one: a label a person set
// stays after liken's uncordon.
import type { V1Node } from "@kubernetes/client-node";

/** The well-known label (k8s.io/api core/v1 LabelNodeExcludeBalancers). */
export const EXCLUDE_LB_LABEL = "node.kubernetes.io/exclude-from-external-load-balancers";
/** On a Node whose exclusion label liken set. */
export const LB_EXCLUDED_BY_ANNOTATION = "liken.sh/lb-excluded-by";
const BY_LIKEN = "liken";

/** The merge patch's metadata that excludes the node, or undefined when it is excluded already. */
export function exclusion(
  node: V1Node,
): { labels: Record<string, string>; annotations: Record<string, string> } | undefined {
  if (node.metadata?.labels?.[EXCLUDE_LB_LABEL] !== undefined) return undefined;
  return {
    labels: { [EXCLUDE_LB_LABEL]: "true" },
    annotations: { [LB_EXCLUDED_BY_ANNOTATION]: BY_LIKEN },
  };
}

/** The merge patch's metadata that undoes liken's exclusion (nothing when it set none). */
export function withoutExclusion(node: V1Node): {
  annotations: Record<string, string | null>;
  labels?: Record<string, string | null>;
} {
  if (node.metadata?.annotations?.[LB_EXCLUDED_BY_ANNOTATION] !== BY_LIKEN)
    return { annotations: {} };
  return {
    annotations: { [LB_EXCLUDED_BY_ANNOTATION]: null },
    labels: { [EXCLUDE_LB_LABEL]: null },
  };
}
