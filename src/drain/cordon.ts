// Cordon and uncordon as decisions on the Node object: liken marks the cordons it makes so
// that it undoes only those (kured#63, brupop#630: nodes left cordoned; and the reverse: a
// person's cordon must survive liken's uncordon).
import type { V1Node } from "@kubernetes/client-node";
import { withoutExclusion } from "./lb-exclusion.js";

/** On a Node that liken cordoned. Removed when liken uncordons it. */
export const CORDONED_BY_ANNOTATION = "liken.sh/cordoned-by";
export const CORDONED_BY_VALUE = "liken";

/** A JSON merge patch for a Node. */
export type NodePatch = {
  metadata: {
    resourceVersion?: string;
    annotations: Record<string, string | null>;
    labels?: Record<string, string | null>;
  };
  spec?: { unschedulable: boolean };
};

export type CordonAction =
  | { kind: "cordon"; patch: NodePatch }
  | { kind: "already-ours" }
  /** Someone else cordoned it: leave their cordon alone and do not claim it. */
  | { kind: "someone-elses" };

export function isCordonedByLiken(node: V1Node): boolean {
  return node.metadata?.annotations?.[CORDONED_BY_ANNOTATION] === CORDONED_BY_VALUE;
}

export function cordonAction(node: V1Node): CordonAction {
  const cordoned = node.spec?.unschedulable === true;
  if (cordoned && isCordonedByLiken(node)) return { kind: "already-ours" };
  if (cordoned) return { kind: "someone-elses" };
  return {
    kind: "cordon",
    patch: {
      // The resourceVersion makes the patch conditional: a cordon by someone else between
      // our read and our write makes it fail (409) instead of being claimed as ours.
      metadata: {
        resourceVersion: node.metadata?.resourceVersion ?? "",
        annotations: { [CORDONED_BY_ANNOTATION]: CORDONED_BY_VALUE },
      },
      spec: { unschedulable: true },
    },
  };
}

export type UncordonAction =
  | { kind: "uncordon"; patch: NodePatch }
  /** liken's mark is there but the node is schedulable already: only drop the mark. */
  | { kind: "forget"; patch: NodePatch }
  | { kind: "not-ours" }
  | { kind: "not-cordoned" };

export function uncordonAction(node: V1Node): UncordonAction {
  const cordoned = node.spec?.unschedulable === true;
  const rv = node.metadata?.resourceVersion ?? "";
  // liken's load balancer exclusion goes with liken's cordon (lb-exclusion.ts).
  const metadata = { resourceVersion: rv, ...withoutExclusion(node) };
  metadata.annotations[CORDONED_BY_ANNOTATION] = null;
  if (isCordonedByLiken(node)) {
    return cordoned
      ? { kind: "uncordon", patch: { metadata, spec: { unschedulable: false } } }
      : { kind: "forget", patch: { metadata } };
  }
  return cordoned ? { kind: "not-ours" } : { kind: "not-cordoned" };
}
