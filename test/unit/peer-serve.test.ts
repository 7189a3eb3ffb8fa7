// The peer server's bounds over real HTTP and real files (docs/peers.md, "Serving"): what a
// connection may cost the agent (one piece in memory, however large the index; a capped number
// of connections; idle sockets closed) and the lowest rate it can pace.
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { connect, type Socket } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { digestOf } from "../../src/verify/digest.js";
import { waitFor } from "../support/kube.js";
import {
  PEER_SERVE_IDLE_MS,
  startPeerServer,
  type PeerServer,
  type Resolve,
} from "../../src/slots/peer-serve.js";
import { checkPeerRate, MIN_PEER_RATE } from "../../src/slots/peer-rate.js";

const HEX = "c".repeat(64);
let dir: string | undefined;
let server: PeerServer | undefined;
const sockets: Socket[] = [];
afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy();
  await server?.close();
  server = undefined;
  if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  dir = undefined;
});

/** A slot file of `size` bytes and a kept index of `indexSize` bytes, both served. */
async function files(size: number, indexSize: number): Promise<Resolve> {
  dir = await mkdtemp(path.join(tmpdir(), "liken-peer-serve-"));
  const device = path.join(dir, "slot");
  const index = path.join(dir, "root.lkidx");
  await writeFile(device, Buffer.alloc(size, 7));
  const bytes = Buffer.alloc(indexSize, 9);
  await writeFile(index, bytes);
  const digest = digestOf(bytes);
  return async () => ({ device, offset: 0, size, index: async () => ({ file: index, digest }) });
}

/** A raw connection that sends one GET and then never reads (a stalled reader). */
function stalled(url: string, pathname: string): Promise<Socket> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const s = connect(Number(u.port), u.hostname, () => {
      s.write(`GET ${pathname} HTTP/1.1\r\nhost: ${u.host}\r\n\r\n`);
      s.pause();
      resolve(s);
    });
    s.once("error", reject);
    sockets.push(s);
  });
}

/** A raw connection that sends nothing and reads whatever comes. */
function raw(url: string): Promise<Socket> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const c = connect(Number(u.port), u.hostname, () => resolve(c));
    c.once("error", reject);
    c.resume();
    sockets.push(c);
  });
}

const closed = (s: Socket): Promise<void> =>
  new Promise((r) => (s.destroyed ? r() : s.once("close", () => r())));

async function until(what: string, ok: () => boolean, ms = 20_000): Promise<void> {
  const end = Date.now() + ms;
  while (!ok()) {
    if (Date.now() > end) throw new Error(`not within ${ms} ms: ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe("the peer server's bounds", () => {
  it("streams the chunk index: stalled readers of a 32 MiB index do not each hold a copy", async () => {
    const resolve = await files(4096, 32 * 1024 * 1024);
    server = await startPeerServer({ resolve, rate: 1024 ** 3, port: 0, host: "127.0.0.1" });
    global.gc?.();
    const before = process.memoryUsage().arrayBuffers;
    const readers = await Promise.all(
      Array.from({ length: 8 }, () => stalled(server!.url, `/v1/releases/${HEX}/root/index`)),
    );
    // Every reader got its headers and the start of the body, then stopped reading.
    expect(readers).toHaveLength(8);
    await until("the server sent to every stalled reader", () => server!.served() >= 8 * 65536);
    await new Promise((r) => setTimeout(r, 300));
    const grown = process.memoryUsage().arrayBuffers - before;
    // A copy each would be 8 × 32 MiB = 256 MiB; one piece each is 8 × 64 KiB.
    expect(grown).toBeLessThan(48 * 1024 * 1024);
  }, 60_000);

  it("serves a whole index that matches its digest, and cuts off one that does not", async () => {
    const resolve = await files(4096, 200_000);
    server = await startPeerServer({ resolve, rate: 1024 ** 3, port: 0, host: "127.0.0.1" });
    const ok = await fetch(`${server.url}v1/releases/${HEX}/root/index`);
    expect(ok.status).toBe(200);
    expect(Buffer.from(await ok.arrayBuffer()).equals(Buffer.alloc(200_000, 9))).toBe(true);
    await writeFile(path.join(dir!, "root.lkidx"), Buffer.alloc(200_000, 8));
    const bad = await fetch(`${server.url}v1/releases/${HEX}/root/index`);
    await expect(bad.arrayBuffer()).rejects.toThrow();
  });

  it("closes a socket that neither reads nor sends for the idle time", async () => {
    const size = 64 * 1024 * 1024;
    const resolve = await files(size, 1024);
    server = await startPeerServer({
      resolve,
      rate: 1024 ** 3,
      port: 0,
      host: "127.0.0.1",
      idleMs: 500,
    });
    const s = await stalled(server.url, `/v1/releases/${HEX}/root`);
    const silent = await raw(server.url);
    await closed(silent);
    // The stalled reader's socket was cut (the server holds no connection any more): reading
    // it now ends before the whole body.
    await waitFor(
      "the server closed both idle sockets",
      async () => (await server!.connections()) === 0,
      {
        timeoutMs: 30_000,
        intervalMs: 50,
      },
    );
    let got = 0;
    s.on("data", (b: Buffer) => (got += b.length));
    s.on("error", () => {});
    s.resume();
    await closed(s);
    expect(got).toBeLessThan(size);
  }, 60_000);

  it("takes at most maxConnections at once; one more is closed at once", async () => {
    const resolve = await files(64 * 1024 * 1024, 1024);
    server = await startPeerServer({
      resolve,
      rate: 1024 ** 3,
      port: 0,
      host: "127.0.0.1",
      maxConnections: 2,
    });
    const first = await Promise.all(
      [0, 1].map(() => stalled(server!.url, `/v1/releases/${HEX}/root`)),
    );
    await until("both readers were answered", () => server!.served() >= 2 * 65536);
    const t0 = Date.now();
    const third = await raw(server.url);
    await closed(third);
    // At once, not by the idle timer (which would close it too, after PEER_SERVE_IDLE_MS).
    expect(Date.now() - t0).toBeLessThan(PEER_SERVE_IDLE_MS / 2);
    expect(first.every((s) => !s.destroyed)).toBe(true);
  }, 60_000);
});

describe("the peer server's rate", () => {
  it("refuses a rate below one 64 KiB piece a second, with its code", async () => {
    expect(checkPeerRate(MIN_PEER_RATE)).toBeUndefined();
    const low = checkPeerRate(16 * 1024);
    expect(low?.code).toBe("LIKEN_SLOT_PEER_RATE_TOO_LOW");
    expect(low?.message).toMatch(/16384 bytes\/s is below the minimum of 64 KiB\/s/);
    const resolve = await files(4096, 1024);
    await expect(
      startPeerServer({ resolve, rate: 16 * 1024, port: 0, host: "127.0.0.1" }),
    ).rejects.toMatchObject({ code: "LIKEN_SLOT_PEER_RATE_TOO_LOW" });
  });

  it("sends at the lowest rate it takes", async () => {
    const resolve = await files(256 * 1024, 1024);
    server = await startPeerServer({ resolve, rate: MIN_PEER_RATE, port: 0, host: "127.0.0.1" });
    const res = await fetch(`${server.url}v1/releases/${HEX}/root`, {
      headers: { range: `bytes=0-${128 * 1024 - 1}` },
    });
    expect(res.status).toBe(206);
    expect((await res.arrayBuffer()).byteLength).toBe(128 * 1024);
  });
});
