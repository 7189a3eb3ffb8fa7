// The Nodes kwok plays. There is no kubelet here: kwok, started by instance.ts, keeps every
// Node that carries KWOK_NODE_ANNOTATION Ready with lease heartbeats, marks the pods placed on
// it Running and Ready, and removes pods that are being deleted, so the real scheduler,
// disruption controller and Eviction API behave as they do in production.
import {
  CoreV1Api,
  PatchStrategy,
  setHeaderOptions,
  type KubeConfig,
  type V1Node,
} from "@kubernetes/client-node";

/** The annotation kwok selects its Nodes by (its --manage-nodes-with-annotation-selector). */
export const KWOK_NODE_ANNOTATION = { key: "kwok.x-k8s.io/node", value: "fake" } as const;

export interface KwokNodeOptions {
  /** Added to kubernetes.io/hostname and kubernetes.io/os. */
  labels?: Record<string, string>;
  /** Capacity and allocatable alike: what the scheduler may place on the Node. */
  capacity: { cpu: string; memory: string; pods: string };
}

export function kwokNode(name: string, opts: KwokNodeOptions): V1Node {
  return {
    metadata: {
      name,
      annotations: {
        [KWOK_NODE_ANNOTATION.key]: KWOK_NODE_ANNOTATION.value,
        // No kubelet caches objects for this Node: nothing to keep alive (kwok's own examples).
        "node.alpha.kubernetes.io/ttl": "0",
      },
      labels: { "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", ...opts.labels },
    },
    spec: {},
    status: { capacity: opts.capacity, allocatable: opts.capacity },
  };
}

/**
 * Gives a kwok Node the addresses a kubelet would report: its InternalIP and its Hostname. The
 * lab's and the tests' machines all run on this host, and their peer servers listen on its
 * loopback, the address cluster-operator then hands out for them (docs/peers.md, "Which
 * address is handed out"). The API server drops a Node's status.addresses on create, so they
 * are written after.
 *
 * Both, as a kubelet writes them: kwok's node-initialize stage rewrites `addresses` whenever
 * either type is missing, and it has no Hostname to give (its NodeName is its own --node-name,
 * unset here), so a Node with an InternalIP alone had its addresses written as nothing at all
 * when kwok initialized it after this patch. CI saw it as a peer assignment that never came.
 */
export async function addressKwokNode(kc: KubeConfig, name: string): Promise<void> {
  await kc.makeApiClient(CoreV1Api).patchNodeStatus(
    {
      name,
      body: {
        status: {
          addresses: [
            { type: "InternalIP", address: "127.0.0.1" },
            { type: "Hostname", address: name },
          ],
        },
      },
    },
    setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
  );
}
