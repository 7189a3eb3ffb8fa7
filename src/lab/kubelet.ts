// The kubelet's part of a simulated boot. kwok keeps a lab Node Ready whether its machine runs
// or not, so the Node alone says nothing about a boot; a real kubelet, once it starts in a new
// boot, posts the Node's status with that boot's id (status.nodeInfo.bootID, read from
// /proc/sys/kernel/random/boot_id) and a Ready condition with a fresh heartbeat. The machine
// supervisor (machine.ts) does the same at every simulated boot whose "kubelet" comes up, so
// the agent's rejoin proof (src/agent/rejoin.ts) is as true in the lab as on a real machine.
import { CoreV1Api, PatchStrategy, setHeaderOptions } from "@kubernetes/client-node";
import { setTimeout as sleep } from "node:timers/promises";
import { loadKubeConfig } from "../api/kubeconfig.js";

/**
 * How often the stand-in tries again while the API server does not take its status: the
 * kubelet retries a failed status update at once (nodeStatusUpdateRetry, 5 tries) and then
 * every nodeStatusUpdateFrequency (10 s); one second keeps the lab's trials short.
 */
export const KUBELET_RETRY_MS = 1_000;

/** The Node status a kubelet posts when it starts in a boot: a strategic merge patch. */
export function bootStatusPatch(bootId: string, now: Date): object {
  const at = now.toISOString().replace(/\.\d+Z$/, "Z");
  return {
    status: {
      nodeInfo: { bootID: bootId },
      // Merged by type with the conditions kwok keeps (strategic merge: conditions key "type").
      conditions: [
        {
          type: "Ready",
          status: "True",
          reason: "KubeletReady",
          message: "kubelet is posting ready status (liken lab)",
          lastHeartbeatTime: at,
          lastTransitionTime: at,
        },
      ],
    },
  };
}

/** Posts the boot's status for `node` until the API server takes it or `signal` aborts. */
export async function postBootStatus(
  kubeconfig: string,
  node: string,
  bootId: string,
  signal: AbortSignal,
  onError: (e: unknown) => void = () => undefined,
): Promise<boolean> {
  const core = loadKubeConfig(kubeconfig).makeApiClient(CoreV1Api);
  const smp = setHeaderOptions("Content-Type", PatchStrategy.StrategicMergePatch);
  while (!signal.aborted) {
    try {
      await core.patchNodeStatus({ name: node, body: bootStatusPatch(bootId, new Date()) }, smp);
      return true;
    } catch (e) {
      onError(e);
      await sleep(KUBELET_RETRY_MS, undefined, { signal }).catch(() => undefined);
    }
  }
  return false;
}
