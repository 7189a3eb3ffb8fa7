// What the drain's integration tests build on their control plane: DRA devices for a
// kwok node, driver DaemonSets, workloads with claims and budgets, and an independent
// recorder of everything that happens to the pods and claims of a namespace.
import {
  CoreV1Api,
  PolicyV1Api,
  Watch,
  type KubeConfig,
  type ResourceV1ResourceClaim,
  type V1Pod,
} from "@kubernetes/client-node";
import { kubeConfig, kubectl, waitFor } from "./kube.js";
import type { Recorded } from "./drain-invariants.js";

export async function apply(yaml: string): Promise<void> {
  const r = await kubectl(["apply", "-f", "-"], { input: yaml });
  if (r.code !== 0) throw new Error(`kubectl apply failed (${r.code}): ${r.stderr}`);
}

export async function remove(args: string[]): Promise<void> {
  await kubectl(["delete", "--ignore-not-found", "--wait=false", ...args]);
}

/** A DeviceClass for `driver`, and a ResourceSlice with `devices` devices on each node. */
export function devicesYaml(driver: string, className: string, nodes: string[], devices = 4) {
  const slices = nodes.map(
    (n) => `---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: ${n}-${className}}
spec:
  driver: ${driver}
  nodeName: ${n}
  pool: {name: ${n}, generation: 1, resourceSliceCount: 1}
  devices: [${Array.from({ length: devices }, (_, i) => `{name: dev-${i}}`).join(", ")}]
`,
  );
  return `apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: ${className}}
spec:
  selectors:
  - cel: {expression: 'device.driver == "${driver}"'}
${slices.join("")}`;
}

export function claimTemplateYaml(ns: string, name: string, className: string): string {
  return `apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: ${name}, namespace: ${ns}}
spec:
  spec:
    devices:
      requests:
      - name: dev
        exactly: {deviceClassName: ${className}}
`;
}

interface PodTemplate {
  app: string;
  nodeSelector: Record<string, string>;
  claimTemplate?: string;
  hostPaths?: string[];
}

function podTemplate(t: PodTemplate): string {
  const volumes = (t.hostPaths ?? []).map(
    (p, i) => `      - name: host-${i}\n        hostPath: {path: ${p}}\n`,
  );
  return `    metadata: {labels: {app: ${t.app}}}
    spec:
      terminationGracePeriodSeconds: 1
      nodeSelector: ${JSON.stringify(t.nodeSelector)}
      containers:
      - name: main
        image: registry.example/${t.app}:1
${t.claimTemplate ? "        resources: {claims: [{name: dev}]}\n" : ""}${
    t.claimTemplate
      ? `      resourceClaims:\n      - {name: dev, resourceClaimTemplateName: ${t.claimTemplate}}\n`
      : ""
  }${volumes.length > 0 ? `      volumes:\n${volumes.join("")}` : ""}`;
}

export function deploymentYaml(ns: string, replicas: number, t: PodTemplate): string {
  return `apiVersion: apps/v1
kind: Deployment
metadata: {name: ${t.app}, namespace: ${ns}}
spec:
  replicas: ${replicas}
  selector: {matchLabels: {app: ${t.app}}}
  template:
${podTemplate(t)}`;
}

export function daemonSetYaml(ns: string, t: PodTemplate): string {
  return `apiVersion: apps/v1
kind: DaemonSet
metadata: {name: ${t.app}, namespace: ${ns}}
spec:
  selector: {matchLabels: {app: ${t.app}}}
  template:
${podTemplate(t)}`;
}

export function pdbYaml(
  ns: string,
  app: string,
  budget: { minAvailable: number } | { maxUnavailable: number },
): string {
  const [k, v] = Object.entries(budget)[0]!;
  return `apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: ${app}, namespace: ${ns}}
spec:
  ${k}: ${v}
  selector: {matchLabels: {app: ${app}}}
`;
}

export async function podsOf(
  ns: string,
  app?: string,
  kc: KubeConfig = kubeConfig(),
): Promise<V1Pod[]> {
  const core = kc.makeApiClient(CoreV1Api);
  const list = await core.listNamespacedPod({
    namespace: ns,
    ...(app !== undefined ? { labelSelector: `app=${app}` } : {}),
  });
  return list.items;
}

const isReady = (p: V1Pod) =>
  p.metadata?.deletionTimestamp == null &&
  (p.status?.conditions ?? []).some((c) => c.type === "Ready" && c.status === "True");

/** Waits until `n` pods of `app` are Running and Ready (kwok) on `node`. */
export async function waitReady(ns: string, app: string, n: number, node: string) {
  return waitFor(
    `${n} Ready pods of ${ns}/${app} on ${node}`,
    async () => {
      const pods = (await podsOf(ns, app)).filter((p) => p.spec?.nodeName === node && isReady(p));
      return pods.length === n ? pods : undefined;
    },
    { timeoutMs: 60_000 },
  );
}

/** Waits until the disruption controller allows `n` disruptions for the budget. */
export async function waitBudget(ns: string, name: string, n: number): Promise<void> {
  const policy = kubeConfig().makeApiClient(PolicyV1Api);
  await waitFor(
    `PodDisruptionBudget ${ns}/${name} allowing ${n} disruption(s)`,
    async () => {
      const b = await policy.readNamespacedPodDisruptionBudget({ name, namespace: ns });
      return (
        b.status?.disruptionsAllowed === n && b.status.observedGeneration === b.metadata?.generation
      );
    },
    { timeoutMs: 60_000 },
  );
}

/**
 * One pod of `app` on `node` (placed by `nodeSelector`) and a PodDisruptionBudget that allows
 * no disruption of it: every eviction from `node` is refused until the budget changes. Returns
 * the pod once it is Ready and the budget allows 0.
 */
export async function podHeldByBudget(
  ns: string,
  app: string,
  nodeSelector: Record<string, string>,
  node: string,
): Promise<V1Pod> {
  await apply(
    deploymentYaml(ns, 1, { app, nodeSelector }) + "---\n" + pdbYaml(ns, app, { minAvailable: 1 }),
  );
  const [pod] = await waitReady(ns, app, 1, node);
  await waitBudget(ns, app, 0);
  return pod!;
}

/** A pod of `app` held by a budget on the kwok node `node` (by hostname): its drain never ends. */
export function podHeldOnNode(ns: string, app: string, node: string): Promise<V1Pod> {
  return podHeldByBudget(ns, app, { "kubernetes.io/hostname": node }, node);
}

export interface Recorder {
  log: Recorded[];
  errors: unknown[];
  stop(): void;
}

/**
 * Watches the pods and ResourceClaims of `ns` and records every event. Returns once both
 * watches have delivered the objects that exist now, so nothing that follows is missed.
 */
export async function recordNamespace(ns: string, kc: KubeConfig = kubeConfig()) {
  const log: Recorded[] = [];
  const errors: unknown[] = [];
  const watch = new Watch(kc);
  let stopped = false;
  const start = (path: string, kind: Recorded["kind"]) =>
    watch.watch(
      path,
      {},
      (type, obj: V1Pod | ResourceV1ResourceClaim) => {
        if (type === "ADDED" || type === "MODIFIED" || type === "DELETED") {
          log.push({ type, kind, rv: Number(obj.metadata?.resourceVersion), obj });
        }
      },
      (err) => {
        // Ending a watch on purpose reports an AbortError: not an error of the run.
        if (err && !stopped) errors.push(err);
      },
    );
  const controllers = await Promise.all([
    start(`/api/v1/namespaces/${ns}/pods`, "Pod"),
    start(`/apis/resource.k8s.io/v1/namespaces/${ns}/resourceclaims`, "ResourceClaim"),
  ]);
  const pods = await podsOf(ns, undefined, kc);
  await waitFor("the recorder to see every pod of the namespace", async () =>
    pods.every((p) => log.some((e) => e.obj.metadata?.uid === p.metadata?.uid)),
  );
  return {
    log,
    errors,
    stop: () => {
      stopped = true;
      controllers.forEach((c) => c.abort());
    },
  } satisfies Recorder;
}

/** Every Event liken recorded on the node with `reason`. */
export async function nodeEvents(node: string, reason: string) {
  const core = kubeConfig().makeApiClient(CoreV1Api);
  const list = await core.listNamespacedEvent({
    namespace: "default",
    fieldSelector: `involvedObject.kind=Node,involvedObject.name=${node},reason=${reason}`,
  });
  return list.items;
}
