// A kept connection broken while idle: the API server "restarts" behind a relay that, like a
// NAT, a load balancer or QEMU's slirp, keeps the client's side of each connection open and
// closes it only when the client next writes to it. A client that reuses such a connection
// sends its next request into it and gets no answer ("socket hang up"; on Debian's nodejs,
// node-fetch read every reused answer as "Premature close" instead, a separate fault:
// docs/adr/node-fetch-premature-close.md); liken's connections
// (src/api/kubeconfig.ts) close themselves after IDLE_TIMEOUT_MS unused, so a request after
// that gap opens a fresh connection and is answered.
import { connect, createServer, type AddressInfo, type Server, type Socket } from "node:net";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { CoreV1Api, Watch } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadKubeConfig } from "../../src/api/index.js";
import { kubeconfigPath, waitFor } from "../support/kube.js";

interface Pair {
  down: Socket;
  up: Socket;
  closedByClient: boolean;
}

class Relay {
  private server: Server | undefined;
  readonly pairs: Pair[] = [];
  port = 0;

  constructor(private readonly target: URL) {}

  async open(): Promise<void> {
    const server = createServer((down) => {
      const up = connect(Number(this.target.port), this.target.hostname);
      const pair: Pair = { down, up, closedByClient: false };
      this.pairs.push(pair);
      down.on("end", () => (pair.closedByClient = true));
      for (const s of [down, up]) s.on("error", () => s.destroy());
      down.pipe(up).pipe(down);
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    this.port = (server.address() as AddressInfo).port;
    this.server = server;
  }

  /**
   * The server behind restarts: every upstream connection is gone. The client's side stays
   * open until the client writes to it; then the relay, with nowhere to send the bytes,
   * closes it.
   */
  restartServer(): void {
    for (const p of this.pairs) {
      if (p.down.destroyed) continue;
      p.down.unpipe(p.up);
      p.up.unpipe(p.down);
      p.up.destroy();
      p.down.on("data", () => p.down.destroy());
      p.down.resume(); // unpipe paused it
    }
  }

  kubeconfig(file: string): string {
    const text = readFileSync(kubeconfigPath(), "utf8");
    writeFileSync(file, text.replace(/server: \S+/g, `server: https://127.0.0.1:${this.port}`));
    return file;
  }

  async close(): Promise<void> {
    for (const p of this.pairs) for (const s of [p.down, p.up]) s.destroy();
    await new Promise<void>((r) => (this.server ? this.server.close(() => r()) : r()));
  }
}

describe("API connections across a server restart", () => {
  let relay: Relay;
  let dir = "";
  let file = "";

  beforeAll(async () => {
    const server = readFileSync(kubeconfigPath(), "utf8").match(/server: (\S+)/)![1]!;
    relay = new Relay(new URL(server));
    await relay.open();
    dir = mkdtempSync(path.join(tmpdir(), "liken-api-restart-"));
    file = relay.kubeconfig(path.join(dir, "kubeconfig"));
  });
  afterAll(async () => {
    await relay.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("without an idle timeout, the request after the restart goes into the dead connection and fails", async () => {
    const api = loadKubeConfig(file, { idleTimeoutMs: 0 }).makeApiClient(CoreV1Api);
    await api.listNamespace({ limit: 1 });
    relay.restartServer();
    const failed = await api.listNamespace({ limit: 1 }).then(
      () => "answered",
      (e: unknown) => String(e),
    );
    expect(failed).toMatch(/failed, reason: socket hang up/);
  });

  it("liken's connections close themselves once idle, and the request after the gap is answered", async () => {
    const idleTimeoutMs = 1000;
    const api = loadKubeConfig(file, { idleTimeoutMs }).makeApiClient(CoreV1Api);
    await api.listNamespace({ limit: 1 });
    const mine = relay.pairs[relay.pairs.length - 1]!;
    relay.restartServer();
    // The client, not the relay or the server, ends its idle connection: that is the fix.
    await waitFor("the client to close its idle connection", async () => mine.closedByClient, {
      timeoutMs: idleTimeoutMs * 5,
      intervalMs: 50,
    });
    const before = relay.pairs.length;
    const r = await api.listNamespace({ limit: 1 });
    expect(r.items.length).toBeGreaterThan(0);
    expect(relay.pairs.length, "a fresh connection carried it").toBe(before + 1);
  });

  it("a quiet watch outlives the idle timeout: only unused connections close", async () => {
    const idleTimeoutMs = 300;
    const kc = loadKubeConfig(file, { idleTimeoutMs });
    const core = kc.makeApiClient(CoreV1Api);
    const name = `quiet-${Date.now().toString(36)}`;
    const seen: string[] = [];
    let ended: unknown = "open";
    const before = relay.pairs.length;
    const req = await new Watch(kc).watch(
      "/api/v1/namespaces",
      { fieldSelector: `metadata.name=${name}` },
      (type) => seen.push(type),
      (e) => (ended = e ?? "ended"),
    );
    try {
      await waitFor("the watch's connection", async () => relay.pairs.length > before);
      const watchPair = relay.pairs[before]!;
      // The clock: twice, a request on a second connection, then that connection closed by
      // the client once idle; the watch's connection sat as long without a byte.
      for (let i = 0; i < 2; i++) {
        await core.listNamespace({ limit: 1 });
        const other = relay.pairs[relay.pairs.length - 1]!;
        expect(other).not.toBe(watchPair);
        await waitFor("the unused connection to close", async () => other.closedByClient, {
          timeoutMs: idleTimeoutMs * 10,
          intervalMs: 50,
        });
      }
      expect(watchPair.closedByClient, "the watch's connection was closed").toBe(false);
      await core.createNamespace({ body: { metadata: { name } } });
      await waitFor("the watch to see the namespace", async () => seen.includes("ADDED"), {
        timeoutMs: 10_000,
      });
      expect(ended).toBe("open");
    } finally {
      req.abort();
      await core.deleteNamespace({ name }).catch(() => undefined);
    }
  });
});
