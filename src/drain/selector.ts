// Label selectors as the API server evaluates them (metav1.LabelSelector): used to find the
// PodDisruptionBudget that holds a pod and the pods a configured driver selector names.
import type { V1LabelSelector } from "@kubernetes/client-node";

export type Labels = Readonly<Record<string, string>>;

/**
 * Whether `labels` satisfy `selector`. An empty selector ({}) matches everything; a missing
 * one (undefined) matches nothing, as for a policy/v1 PodDisruptionBudget.
 */
export function selectorMatches(selector: V1LabelSelector | undefined, labels: Labels): boolean {
  if (selector === undefined) return false;
  for (const [key, value] of Object.entries(selector.matchLabels ?? {})) {
    if (labels[key] !== value) return false;
  }
  return (selector.matchExpressions ?? []).every((req) => {
    const has = Object.hasOwn(labels, req.key);
    const value = labels[req.key];
    switch (req.operator) {
      case "In":
        return has && (req.values ?? []).includes(value ?? "");
      case "NotIn":
        return !has || !(req.values ?? []).includes(value ?? "");
      case "Exists":
        return has;
      case "DoesNotExist":
        return !has;
      default:
        // An operator the API server would have refused: match nothing rather than guess.
        return false;
    }
  });
}

/**
 * Parses the short form people type on a command line, `key=value,key2=value2`, into a
 * matchLabels selector. Set-based expressions belong in the agent config, not in a flag.
 */
export function parseMatchLabels(text: string): V1LabelSelector | undefined {
  const matchLabels: Record<string, string> = {};
  for (const part of text.split(",")) {
    const eq = part.indexOf("=");
    if (eq <= 0) return undefined;
    const key = part.slice(0, eq).trim();
    const value = part.slice(eq + 1).trim();
    if (key === "") return undefined;
    matchLabels[key] = value;
  }
  return { matchLabels };
}
