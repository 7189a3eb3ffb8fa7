// The workload on the guest's Node, so that its drain is real: two pods of a Deployment placed
// on the guest's Node (its real kubelet on a QEMU guest, a kwok Node for the lab's stand-in), a
// PodDisruptionBudget that lets one go at a time, and a spare kwok Node that joins after they
// are placed, where the evicted pods come back. The agent's drain must evict one, wait for its
// replacement to be Ready on the spare, then evict the other. The pods run the image's
// workload (testbed/machine/workload.c, loaded offline: imagePullPolicy Never), which stays
// WORKLOAD_LINGER_S after SIGTERM, within its grace period.
import {
  AppsV1Api,
  CoreV1Api,
  PolicyV1Api,
  type KubeConfig,
  type V1Pod,
} from "@kubernetes/client-node";
import { setTimeout as sleep } from "node:timers/promises";
import { WORKLOAD_IMAGE } from "../../testbed/machine/node.js";
import { kwokNode } from "../../src/controlplane/kwok.js";

export const WORKLOAD_NAMESPACE = "workload";
const APP = "web";
export const WORKLOAD_REPLICAS = 2;
/** Two pods started by a kubelet under TCG on two busy cores: sandbox, then container. */
const PLACE_TIMEOUT_MS = 300_000;
/** How long the workload stays after SIGTERM, and the grace its pods are given (more). */
export const WORKLOAD_LINGER_S = 3;
export const WORKLOAD_GRACE_S = 10;
const LABEL = { "liken.sh/machine-scenario": "true" };
const CAPACITY = { cpu: "8", memory: "32Gi", pods: "110" };

/** The kwok Node the drained pods come back on. */
export const spareNode = (machine: string): string => `${machine}-spare`;

/** The labels the workload's pods select their Node by (the guest's kubelet registers them). */
export const NODE_LABELS = LABEL;

export async function createNode(kc: KubeConfig, name: string): Promise<void> {
  await kc.makeApiClient(CoreV1Api).createNode({
    body: kwokNode(name, { labels: LABEL, capacity: CAPACITY }),
  });
}

async function pods(kc: KubeConfig): Promise<V1Pod[]> {
  const { items } = await kc
    .makeApiClient(CoreV1Api)
    .listNamespacedPod({ namespace: WORKLOAD_NAMESPACE, labelSelector: `app=${APP}` });
  return items;
}

const ready = (p: V1Pod): boolean =>
  p.metadata?.deletionTimestamp === undefined &&
  (p.status?.conditions ?? []).some((c) => c.type === "Ready" && c.status === "True");

/** Places the workload on `node` (the only labelled Node yet), then adds the spare Node. */
export async function placeWorkload(kc: KubeConfig, node: string, spare: string): Promise<void> {
  const core = kc.makeApiClient(CoreV1Api);
  await core.createNamespace({ body: { metadata: { name: WORKLOAD_NAMESPACE } } });
  const labels = { app: APP };
  await kc.makeApiClient(AppsV1Api).createNamespacedDeployment({
    namespace: WORKLOAD_NAMESPACE,
    body: {
      metadata: { name: APP },
      spec: {
        replicas: WORKLOAD_REPLICAS,
        selector: { matchLabels: labels },
        template: {
          metadata: { labels },
          spec: {
            terminationGracePeriodSeconds: WORKLOAD_GRACE_S,
            nodeSelector: LABEL,
            containers: [
              {
                name: "main",
                image: WORKLOAD_IMAGE,
                imagePullPolicy: "Never",
                args: [String(WORKLOAD_LINGER_S)],
              },
            ],
          },
        },
      },
    },
  });
  await kc.makeApiClient(PolicyV1Api).createNamespacedPodDisruptionBudget({
    namespace: WORKLOAD_NAMESPACE,
    body: {
      metadata: { name: APP },
      spec: { minAvailable: WORKLOAD_REPLICAS - 1, selector: { matchLabels: labels } },
    },
  });
  const deadline = Date.now() + PLACE_TIMEOUT_MS;
  for (;;) {
    const on = (await pods(kc)).filter((p) => p.spec?.nodeName === node && ready(p));
    if (on.length === WORKLOAD_REPLICAS) break;
    if (Date.now() > deadline) {
      throw new Error(
        `the workload's ${WORKLOAD_REPLICAS} pods were not Ready on ${node} within ${PLACE_TIMEOUT_MS / 1000} s (${on.length} were)`,
      );
    }
    await sleep(250);
  }
  await createNode(kc, spare);
}

/** Where the workload's Ready pods run now: node name → count. */
export async function workloadPlacement(kc: KubeConfig): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const p of await pods(kc)) {
    if (!ready(p)) continue;
    const n = p.spec?.nodeName ?? "(none)";
    out[n] = (out[n] ?? 0) + 1;
  }
  return out;
}
