// Which kubeconfig contexts a fleet command talks to, and one KubeConfig per context.
// `--contexts a,b,c` names them; without it, every context of the kubeconfig. A name the
// kubeconfig does not hold is refused before anything is read or written: a typo must not
// look like a cluster that could not be reached.
import { KubeConfig } from "@kubernetes/client-node";
import { FleetError } from "./errors.js";

/** The names in `--contexts a,b,c` (spaces and empty entries ignored, duplicates once). */
export function parseContextList(text: string): string[] {
  const names = text
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s !== "");
  return [...new Set(names)];
}

/** The contexts to visit, in the order asked (or the kubeconfig's order). */
export function chooseContexts(kc: KubeConfig, asked: readonly string[] | undefined): string[] {
  const all = kc.getContexts().map((c) => c.name);
  if (all.length === 0) {
    throw new FleetError(
      "LIKEN_FLEET_NO_CONTEXT",
      "the kubeconfig has no context: point --kubeconfig (or KUBECONFIG) at a file with one context per cluster",
    );
  }
  if (asked === undefined) return all;
  if (asked.length === 0) {
    throw new FleetError(
      "LIKEN_FLEET_NO_CONTEXT",
      "--contexts names no context: give them comma-separated (--contexts store-1,store-2), or leave --contexts out for every context of the kubeconfig",
    );
  }
  const missing = asked.filter((n) => !all.includes(n));
  if (missing.length > 0) {
    const shown = all.length > 8 ? `${all.slice(0, 8).join(", ")}, ...` : all.join(", ");
    throw new FleetError(
      "LIKEN_FLEET_NO_CONTEXT",
      `--contexts names ${missing.join(", ")}, which the kubeconfig does not have (it has ${all.length}: ${shown}); nothing was read or written`,
      { context: { missing } },
    );
  }
  return [...asked];
}

/** A KubeConfig whose current context is `name` (the loaded one is left as it was). */
export function forContext(kc: KubeConfig, name: string): KubeConfig {
  const one = new KubeConfig();
  one.loadFromOptions({
    clusters: kc.clusters,
    users: kc.users,
    contexts: kc.contexts,
    currentContext: name,
  });
  return one;
}
