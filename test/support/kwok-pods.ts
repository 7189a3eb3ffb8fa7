// Pods on kwok Nodes for the tests that list a node's pods through the agent's lean client (the
// health gates' pods, the blocking pods): the Nodes, a namespace, the pods pinned to their
// Nodes, and the wait until kwok runs them all; and the cleanup.
import { expect } from "vitest";
import { createKwokNode, kubectl, waitFor } from "./kube.js";

export interface KwokPod {
  name: string;
  node: string;
  labels: Record<string, string>;
}

function podJson(ns: string, p: KwokPod): string {
  return JSON.stringify({
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: p.name, namespace: ns, labels: p.labels },
    spec: {
      nodeName: p.node,
      tolerations: [{ operator: "Exists" }],
      containers: [{ name: "main", image: "registry.example/x:1" }],
    },
  });
}

/** Makes `nodes`, namespace `ns` and `pods` in it, and waits until kwok runs every pod. */
export async function kwokPods(ns: string, nodes: string[], pods: KwokPod[]): Promise<void> {
  for (const n of nodes) await createKwokNode(n);
  expect((await kubectl(["create", "namespace", ns])).code).toBe(0);
  for (const p of pods) {
    const r = await kubectl(["apply", "-f", "-"], { input: podJson(ns, p) });
    expect(r.code, r.stderr).toBe(0);
  }
  await waitFor(
    "kwok runs the pods",
    async () => {
      const r = await kubectl(["get", "pods", "-n", ns, "-o", "jsonpath={.items[*].status.phase}"]);
      return r.stdout.split(" ").filter((p) => p === "Running").length === pods.length;
    },
    { timeoutMs: 60_000, intervalMs: 500 },
  );
}

/** Deletes what kwokPods made, without waiting. */
export async function dropKwokPods(ns: string, nodes: string[]): Promise<void> {
  await kubectl(["delete", "namespace", ns, "--wait=false"]);
  await kubectl(["delete", "node", ...nodes, "--wait=false"]);
}
