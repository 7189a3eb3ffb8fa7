// The operator's Events travel on at most EVENT_CONNECTIONS connections (operator.ts,
// eventsConfig; src/api/kubeconfig.ts maxSockets): a pass that grants 500 turns makes 500
// Events at once, and uncapped each opened a connection of its own. A plain HTTP server on an
// ephemeral port stands for the API server: the test counts the connections it accepts.
import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import type { Cluster } from "../../src/api/index.js";
import { KubeEvents } from "../../src/operator/events.js";
import { EVENT_CONNECTIONS, eventsConfig } from "../../src/operator/run/operator.js";
import { plainKubeConfig } from "../support/plain-kubeconfig.js";

let server: http.Server | undefined;
afterEach(async () => {
  server?.closeAllConnections();
  await new Promise((r) => server?.close(r));
  server = undefined;
});

async function apiServer(): Promise<{
  url: string;
  connections: () => number;
  events: () => number;
}> {
  let connections = 0;
  let events = 0;
  server = http.createServer((req, res) => {
    let body = "";
    req.on("data", (c: Buffer) => (body += c.toString()));
    req.on("end", () => {
      events++;
      // A little time per Event, so that the burst overlaps as it does on a busy API server.
      setTimeout(() => {
        // With its length, as kube-apiserver (Go's net/http) answers a small body.
        res.writeHead(201, {
          "content-type": "application/json",
          "content-length": Buffer.byteLength(body),
        });
        res.end(body);
      }, 5);
    });
  });
  server.on("connection", () => connections++);
  await new Promise<void>((r) => server!.listen(0, "127.0.0.1", r));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, connections: () => connections, events: () => events };
}

const cluster = { metadata: { name: "bench", uid: "u-1" } } as Cluster;

describe("operator Events: a burst rides a few kept connections", () => {
  it(`200 Events at once open at most ${EVENT_CONNECTIONS} connections, and every one arrives`, async () => {
    const api = await apiServer();
    const errors: unknown[] = [];
    const sink = new KubeEvents(
      eventsConfig(plainKubeConfig(api.url)),
      "cluster-operator",
      "op-1",
      (e) => errors.push(e),
    );
    for (let i = 0; i < 200; i++) sink.record(cluster, "Normal", "TurnGranted", `turn ${i}`);
    const deadline = Date.now() + 30_000;
    while (api.events() < 200 && errors.length === 0) {
      if (Date.now() > deadline) throw new Error(`timed out: ${api.events()} Events arrived`);
      await new Promise((r) => setTimeout(r, 10));
    }
    expect(errors).toEqual([]);
    expect(api.connections()).toBeLessThanOrEqual(EVENT_CONNECTIONS);
  });
});
