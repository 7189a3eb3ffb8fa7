// Connections to the API server are reused: client-node alone opens a new TCP + TLS
// connection for every request, which at fleet scale costs more CPU than the requests.
import diagnostics from "node:diagnostics_channel";
import type { IncomingMessage } from "node:http";
import type { Socket } from "node:net";
import { KubeConfig, CoreV1Api } from "@kubernetes/client-node";
import { beforeAll, describe, expect, it } from "vitest";
import { LikenApi, loadKubeConfig, reuseConnections } from "../../src/api/index.js";
import { kubeconfigPath, waitFor } from "../support/kube.js";

/** Distinct sockets that carried the HTTP responses this process received while fn ran
 * (http's own diagnostics channel), less those already open before. */
const everSeen = new WeakSet<Socket>();
async function socketsOpenedBy(fn: () => Promise<void>): Promise<number> {
  const used = new Set<Socket>();
  const count = (msg: unknown): void => {
    const socket = (msg as { response: IncomingMessage }).response.socket;
    if (socket !== null && !everSeen.has(socket)) used.add(socket);
  };
  diagnostics.subscribe("http.client.response.finish", count);
  try {
    await fn();
  } finally {
    diagnostics.unsubscribe("http.client.response.finish", count);
  }
  for (const s of used) everSeen.add(s);
  return used.size;
}

async function tenReads(kc: KubeConfig): Promise<void> {
  const api = kc.makeApiClient(CoreV1Api);
  for (let i = 0; i < 10; i++) await api.listNamespace({ limit: 1 });
}

describe("API connections", () => {
  beforeAll(async () => {
    // Right after the CRDs are applied the server may answer 429 while its cache fills.
    const api = LikenApi.fromKubeconfig(kubeconfigPath());
    await waitFor("Clusters can be listed", async () => (await api.clusters.list(), true));
  });

  it("client-node alone opens a connection per request (the reason for reuseConnections)", async () => {
    const kc = new KubeConfig();
    kc.loadFromFile(kubeconfigPath());
    expect(await socketsOpenedBy(() => tenReads(kc))).toBe(10);
  });

  it("a loaded kubeconfig reuses one keep-alive connection for sequential requests", async () => {
    const kc = loadKubeConfig(kubeconfigPath());
    expect(await socketsOpenedBy(() => tenReads(kc))).toBe(1);
  });

  it("LikenApi makes a caller's kubeconfig reuse connections too, and it stays idempotent", async () => {
    const kc = new KubeConfig();
    kc.loadFromFile(kubeconfigPath());
    const api = new LikenApi(kc);
    expect(reuseConnections(kc)).toBe(kc);
    const opened = await socketsOpenedBy(async () => {
      for (let i = 0; i < 5; i++) await api.clusters.list();
      await tenReads(kc);
    });
    expect(opened).toBe(1);
  });

  it("concurrent requests open a few connections and the next burst reuses them", async () => {
    const kc = loadKubeConfig(kubeconfigPath());
    const api = kc.makeApiClient(CoreV1Api);
    const burst = () =>
      Promise.all(Array.from({ length: 8 }, () => api.listNamespace({ limit: 1 })));
    const first = await socketsOpenedBy(async () => void (await burst()));
    expect(first).toBeGreaterThan(0);
    expect(first).toBeLessThanOrEqual(8);
    expect(await socketsOpenedBy(async () => void (await burst()))).toBe(0);
  });
});
