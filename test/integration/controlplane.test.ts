// Proof that the control plane under every integration test is the real thing: the real
// scheduler places pods, the real disruption controller computes PDB status, the Eviction
// API refuses what the PDB forbids, and the API server enforces optimistic concurrency.
import { afterAll, describe, expect, it, beforeAll } from "vitest";
import {
  ApiException,
  AppsV1Api,
  CoreV1Api,
  CustomObjectsApi,
  ApiextensionsV1Api,
  PatchStrategy,
  PolicyV1Api,
  setHeaderOptions,
} from "@kubernetes/client-node";
import { KUBERNETES_VERSION } from "../../src/controlplane/versions.js";
import { addressKwokNode, kwokNode } from "../../src/controlplane/kwok.js";
import {
  createKwokNode,
  createNamespace,
  kubeConfig,
  kubectl,
  uniqueName,
  waitFor,
  deleteNamespaces,
} from "../support/kube.js";

// Registered first, so it runs last (afterAll hooks run in reverse): the namespaces this file
// made go once what ran in them has stopped.
afterAll(deleteNamespaces);

function status(e: unknown): number | undefined {
  return e instanceof ApiException ? e.code : undefined;
}

describe("the test control plane", () => {
  it("is the pinned Kubernetes release and reports ready", async () => {
    const v = await kubectl(["version", "-o", "json"]);
    expect(v.code).toBe(0);
    const parsed = JSON.parse(v.stdout) as {
      serverVersion: { gitVersion: string };
      clientVersion: { gitVersion: string };
    };
    expect(parsed.serverVersion.gitVersion).toBe(`v${KUBERNETES_VERSION}`);
    expect(parsed.clientVersion.gitVersion).toBe(`v${KUBERNETES_VERSION}`);
    const ready = await kubectl(["get", "--raw", "/readyz"]);
    expect(ready.stdout.trim()).toBe("ok");
  });
});

describe("kwok's Nodes", () => {
  it("get the host's loopback address from kwok itself, not only from liken's patch", async () => {
    // kwok's own stages write a Node's addresses (node-initialize, the heartbeat) from its view
    // of the Node; a view older than addressKwokNode's patch once wrote `addresses: null`, and
    // the machine's peer server was handed out to nobody. kwok now has an address to write.
    const name = uniqueName("kwok-addr");
    const core = kubeConfig().makeApiClient(CoreV1Api);
    await core.createNode({
      body: kwokNode(name, { capacity: { cpu: "1", memory: "1Gi", pods: "10" } }),
    });
    try {
      const addresses = await waitFor(
        `kwok gives Node ${name} an address`,
        async () => {
          const n = await core.readNode({ name });
          const a = n.status?.addresses ?? [];
          return a.length > 0 ? a : undefined;
        },
        { timeoutMs: 60_000 },
      );
      expect(addresses).toContainEqual({ type: "InternalIP", address: "127.0.0.1" });
    } finally {
      await core.deleteNode({ name });
    }
  });

  it("keep the addresses liken wrote when kwok initializes them after", async () => {
    // The order CI met by chance, made certain: liken's patch is on the Node when kwok's
    // node-initialize stage runs (it runs on any Node not Ready: here made not Ready again).
    const name = uniqueName("kwok-first");
    const core = kubeConfig().makeApiClient(CoreV1Api);
    const readyIs = (want: string) => async () => {
      const n = await core.readNode({ name });
      const r = n.status?.conditions?.find((c) => c.type === "Ready");
      return r?.status === want ? n : undefined;
    };
    await core.createNode({
      body: kwokNode(name, { capacity: { cpu: "1", memory: "1Gi", pods: "10" } }),
    });
    try {
      await waitFor(`kwok initializes Node ${name}`, readyIs("True"), { timeoutMs: 60_000 });
      await addressKwokNode(kubeConfig(), name);
      const notReady = { type: "Ready", status: "False", reason: "Test", message: "again" };
      await core.patchNodeStatus(
        { name, body: { status: { conditions: [notReady] } } },
        setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
      );
      const again = await waitFor(`kwok initializes Node ${name} again`, readyIs("True"), {
        timeoutMs: 60_000,
      });
      expect(again.status?.addresses ?? []).toContainEqual({
        type: "InternalIP",
        address: "127.0.0.1",
      });
    } finally {
      await core.deleteNode({ name });
    }
  });
});

describe("PodDisruptionBudgets and the Eviction API", () => {
  let ns = "";
  const node = uniqueName("kwok-node");
  const kc = kubeConfig();
  const core = kc.makeApiClient(CoreV1Api);
  const apps = kc.makeApiClient(AppsV1Api);
  const policy = kc.makeApiClient(PolicyV1Api);

  beforeAll(async () => {
    ns = await createNamespace("pdb");
    await createKwokNode(node);
  });

  it("allows one eviction, refuses the next with 429, and the evicted pod goes away", async () => {
    const labels = { app: "web" };
    await apps.createNamespacedDeployment({
      namespace: ns,
      body: {
        metadata: { name: "web" },
        spec: {
          replicas: 2,
          selector: { matchLabels: labels },
          template: {
            metadata: { labels },
            spec: {
              nodeSelector: { "kubernetes.io/hostname": node },
              containers: [{ name: "c", image: "registry.invalid/web:1" }],
            },
          },
        },
      },
    });
    await policy.createNamespacedPodDisruptionBudget({
      namespace: ns,
      body: {
        metadata: { name: "web" },
        spec: { minAvailable: 1, selector: { matchLabels: labels } },
      },
    });

    const pods = await waitFor(
      "both pods Running and Ready on the kwok node",
      async () => {
        const list = await core.listNamespacedPod({ namespace: ns, labelSelector: "app=web" });
        const ready = list.items.filter(
          (p) =>
            p.spec?.nodeName === node &&
            p.status?.phase === "Running" &&
            p.status.conditions?.some((c) => c.type === "Ready" && c.status === "True"),
        );
        return ready.length === 2 ? ready : undefined;
      },
      { timeoutMs: 60_000 },
    );

    await waitFor("the disruption controller to allow exactly one disruption", async () => {
      const pdb = await policy.readNamespacedPodDisruptionBudget({ name: "web", namespace: ns });
      return pdb.status?.currentHealthy === 2 && pdb.status.disruptionsAllowed === 1;
    });

    // Cordon first, as a drain does: the replacement stays Pending (kwok would make a
    // scheduled one Ready within milliseconds), so the PDB has no healthy pod to spare.
    await core.patchNode(
      { name: node, body: { spec: { unschedulable: true } } },
      setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
    );
    const [first, second] = pods.map((p) => p.metadata!.name!);
    await core.createNamespacedPodEviction({
      name: first!,
      namespace: ns,
      body: { metadata: { name: first!, namespace: ns } },
    });

    await waitFor("the replacement pod to exist, unscheduled", async () => {
      const list = await core.listNamespacedPod({ namespace: ns, labelSelector: "app=web" });
      return list.items.some((p) => !p.spec?.nodeName);
    });
    // One pod is gone or going and its replacement cannot become Ready: the API server must
    // refuse the second eviction on the PDB's behalf.
    let refused: number | undefined;
    try {
      await core.createNamespacedPodEviction({
        name: second!,
        namespace: ns,
        body: { metadata: { name: second!, namespace: ns } },
      });
    } catch (e) {
      refused = status(e);
      expect(String((e as ApiException<string>).body)).toContain("disruption budget");
    }
    expect(refused).toBe(429);

    await waitFor(
      `evicted pod ${first} to disappear`,
      async () => {
        try {
          await core.readNamespacedPod({ name: first!, namespace: ns });
          return false;
        } catch (e) {
          return status(e) === 404;
        }
      },
      { timeoutMs: 60_000 },
    );
    const stillThere = await core.readNamespacedPod({ name: second!, namespace: ns });
    expect(stillThere.metadata?.deletionTimestamp).toBeUndefined();
  });
});

describe("optimistic concurrency on custom resources", () => {
  it("refuses an update with a stale resourceVersion with 409", async () => {
    const kc = kubeConfig();
    const ext = kc.makeApiClient(ApiextensionsV1Api);
    const custom = kc.makeApiClient(CustomObjectsApi);
    const group = "probe.liken.sh";
    const plural = uniqueName("widgets").replace(/-/g, "");
    await ext.createCustomResourceDefinition({
      body: {
        metadata: { name: `${plural}.${group}` },
        spec: {
          group,
          scope: "Cluster",
          names: { plural, singular: plural.slice(0, -1), kind: `W${plural}` },
          versions: [
            {
              name: "v1",
              served: true,
              storage: true,
              schema: {
                openAPIV3Schema: {
                  type: "object",
                  properties: { spec: { type: "object", properties: { n: { type: "integer" } } } },
                },
              },
            },
          ],
        },
      },
    });
    await waitFor("the CRD to be served", async () => {
      try {
        return await custom.listClusterCustomObject({ group, version: "v1", plural });
      } catch {
        return undefined;
      }
    });
    const created = (await custom.createClusterCustomObject({
      group,
      version: "v1",
      plural,
      body: {
        apiVersion: `${group}/v1`,
        kind: `W${plural}`,
        metadata: { name: "one" },
        spec: { n: 1 },
      },
    })) as { metadata: { resourceVersion: string } };
    const stale = created.metadata.resourceVersion;
    /** Writes "one" with spec.n `n` over the version the test read at its creation. */
    const replaceOverStale = (n: number) =>
      custom.replaceClusterCustomObject({
        group,
        version: "v1",
        plural,
        name: "one",
        body: {
          apiVersion: `${group}/v1`,
          kind: `W${plural}`,
          metadata: { name: "one", resourceVersion: stale },
          spec: { n },
        },
      });
    await replaceOverStale(2);
    let code: number | undefined;
    try {
      await replaceOverStale(3);
    } catch (e) {
      code = status(e);
    }
    expect(code).toBe(409);
    await ext.deleteCustomResourceDefinition({ name: `${plural}.${group}` });
  });
});
