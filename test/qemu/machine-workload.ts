// The workload on the guest's Node, so that its drain is real: two pods of a Deployment placed
// on the guest's kwok Node, a PodDisruptionBudget that lets one go at a time, and a spare Node
// that joins after they are placed, where the evicted pods come back. The agent's drain must
// evict one, wait for its replacement to be Ready on the spare, then evict the other.
import {
  AppsV1Api,
  CoreV1Api,
  PolicyV1Api,
  type KubeConfig,
  type V1Pod,
} from "@kubernetes/client-node";
import { setTimeout as sleep } from "node:timers/promises";
import { kwokNode } from "../../src/controlplane/kwok.js";

export const WORKLOAD_NAMESPACE = "workload";
const APP = "web";
const REPLICAS = 2;
const PLACE_TIMEOUT_MS = 120_000;
const LABEL = { "liken.sh/machine-scenario": "true" };
const CAPACITY = { cpu: "8", memory: "32Gi", pods: "110" };

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
        replicas: REPLICAS,
        selector: { matchLabels: labels },
        template: {
          metadata: { labels },
          spec: {
            terminationGracePeriodSeconds: 1,
            nodeSelector: LABEL,
            containers: [{ name: "main", image: "registry.example/web:1" }],
          },
        },
      },
    },
  });
  await kc.makeApiClient(PolicyV1Api).createNamespacedPodDisruptionBudget({
    namespace: WORKLOAD_NAMESPACE,
    body: {
      metadata: { name: APP },
      spec: { minAvailable: REPLICAS - 1, selector: { matchLabels: labels } },
    },
  });
  const deadline = Date.now() + PLACE_TIMEOUT_MS;
  for (;;) {
    const on = (await pods(kc)).filter((p) => p.spec?.nodeName === node && ready(p));
    if (on.length === REPLICAS) break;
    if (Date.now() > deadline) {
      throw new Error(
        `the workload's ${REPLICAS} pods were not Ready on ${node} within ${PLACE_TIMEOUT_MS / 1000} s (${on.length} were)`,
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
