// Which pod on the node runs a DRA driver. The API has no link from a driver name to its
// pod, so liken uses a documented rule (docs/drain.md, "Which pod runs a driver"):
//   1. a configured selector for the driver (agent config / drain options), if it matches a
//      pod on the node;
//   2. else the DaemonSet pods on the node with a hostPath at or under
//      /var/lib/kubelet/plugins/<driver> (where a kubelet plugin keeps its socket), or with
//      the plugin registry /var/lib/kubelet/plugins_registry together with a plugin directory
//      whose name contains the driver name;
//   3. else the driver is unidentified: the drain says so, and every pod that could be it
//      (it touches the kubelet's plugin directories) leaves last.
import type { V1LabelSelector, V1Pod } from "@kubernetes/client-node";
import { hostPathsOf, isDaemonSetPod, isWithin, uidOf } from "./pods.js";
import { selectorMatches } from "./selector.js";

export const KUBELET_PLUGINS_DIR = "/var/lib/kubelet/plugins";
export const KUBELET_PLUGIN_REGISTRY_DIR = "/var/lib/kubelet/plugins_registry";

/** How the agent config names the pods of one driver. */
export interface DriverPodSelector {
  /** Only pods in this namespace; all namespaces when absent. */
  namespace?: string;
  selector: V1LabelSelector;
}

export type DriverPodSelectors = Readonly<Record<string, DriverPodSelector>>;

export interface Identification {
  driver: string;
  by: "selector" | "plugin-dir" | "unidentified";
  /** The pods on the node that run it; empty when unidentified. */
  podUids: string[];
}

export function identifyDriver(
  driver: string,
  pods: readonly V1Pod[],
  selectors: DriverPodSelectors,
): Identification {
  const configured = selectors[driver];
  if (configured !== undefined) {
    const matched = pods.filter(
      (p) =>
        (configured.namespace === undefined || p.metadata?.namespace === configured.namespace) &&
        selectorMatches(configured.selector, p.metadata?.labels ?? {}),
    );
    // A selector that matches nothing here falls through to the plugin-directory rule: a
    // stale config must not hide a driver the node plainly runs.
    if (matched.length > 0) return { driver, by: "selector", podUids: matched.map(uidOf) };
  }
  const byDir = pods.filter((p) => isDaemonSetPod(p) && mountsPluginDirOf(p, driver));
  if (byDir.length > 0) return { driver, by: "plugin-dir", podUids: byDir.map(uidOf) };
  return { driver, by: "unidentified", podUids: [] };
}

/** Rule 2 for one pod: its hostPaths name the kubelet plugin directory of `driver`. */
export function mountsPluginDirOf(pod: V1Pod, driver: string): boolean {
  const paths = hostPathsOf(pod);
  const own = `${KUBELET_PLUGINS_DIR}/${driver}`;
  if (paths.some((p) => isWithin(p, own))) return true;
  const registry = paths.some((p) => isWithin(p, KUBELET_PLUGIN_REGISTRY_DIR));
  return registry && paths.some((p) => pluginDirName(p)?.includes(driver) === true);
}

/** `/var/lib/kubelet/plugins/<name>/...` -> `<name>`; anything else -> undefined. */
function pluginDirName(path: string): string | undefined {
  if (!isWithin(path, KUBELET_PLUGINS_DIR) || path === KUBELET_PLUGINS_DIR) return undefined;
  return path.slice(KUBELET_PLUGINS_DIR.length + 1).split("/")[0];
}

/**
 * Could this pod run some kubelet plugin? Its hostPaths reach the plugin or registry
 * directory (a parent such as /var/lib/kubelet or / counts: it sees them too). Used only
 * when a driver is unidentified, to keep the pods that may be it until last.
 */
export function mayRunAPlugin(pod: V1Pod): boolean {
  return hostPathsOf(pod).some(
    (p) =>
      isWithin(p, KUBELET_PLUGINS_DIR) ||
      isWithin(p, KUBELET_PLUGIN_REGISTRY_DIR) ||
      isWithin(KUBELET_PLUGINS_DIR, p),
  );
}
