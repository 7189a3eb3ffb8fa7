// Peers over real HTTP on loopback (docs/peers.md): machine P staged release 2.0 from the
// channel and serves it with the real peer server; machine M downloads 2.0 with P as its peer
// and the channel sends none of the artifact. A peer that lies (a flipped bit), stalls, vanishes
// mid-body or is not there is dropped for the release, named in the log and the drop callback,
// its chunks fetched from the next source; M always ends staged and verified, slot a untouched.
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { buildRelease } from "../../src/release/build.js";
import { verifyStagedSlot } from "../../src/slots/check.js";
import { peerArtifactPath, type PeerDrop } from "../../src/slots/peer-sources.js";
import { resolveFromStore, startPeerServer, type PeerServer } from "../../src/slots/peer-serve.js";
import { PEER_SLOW_WINDOW_MS } from "../../src/slots/seeded.js";
import { downloadRelease, type DownloadRequest } from "../../src/slots/stage.js";
import { SlotStore } from "../../src/slots/store.js";
import { INDEX_CHUNK } from "../../src/verify/chunk-index.js";
import { startFaultServer, type FaultServer } from "./fault-server.js";
import { fileSlots } from "../support/file-slots.js";

const KiB = 1024;
const MiB = 1024 * KiB;
const root = mkdtempSync(path.join(tmpdir(), "liken-peers-"));
const channelDir = path.join(root, "channel");
const v2 = randomBytes(256 * INDEX_CHUNK + 77);
let digest = "";
let channel: FaultServer;
/** A fault server whose root holds 2.0's artifact where a peer serves it: a peer that misbehaves on demand. */
let faulty: FaultServer;
let faultyPath = "";
let n = 0;

beforeAll(async () => {
  const file = path.join(root, "2.0.img");
  writeFileSync(file, v2);
  digest = (
    await buildRelease({
      version: "2.0",
      out: channelDir,
      chunkSize: 64 * KiB,
      artifacts: [{ name: "rootfs", file }],
    })
  ).digest;
  channel = await startFaultServer(channelDir);
  const peerDir = path.join(root, "faulty");
  faultyPath = `/${peerArtifactPath(digest, "rootfs")}`;
  mkdirSync(path.dirname(path.join(peerDir, faultyPath)), { recursive: true });
  writeFileSync(path.join(peerDir, faultyPath), v2);
  faulty = await startFaultServer(peerDir);
});
afterAll(async () => {
  await channel.close();
  await faulty.close();
  rmSync(root, { recursive: true, force: true });
});
afterEach(() => {
  channel.reset();
  faulty.reset();
});

/** A machine whose slot a holds nothing of 2.0 (zeros): every chunk is remote. */
async function machine() {
  const dir = path.join(root, `m${++n}`);
  mkdirSync(dir);
  const config = fileSlots(dir, { a: 2 * MiB, b: 2 * MiB });
  const a = path.join(dir, "a.img");
  const store = new SlotStore(config);
  const messages: string[] = [];
  const drops: PeerDrop[] = [];
  const req = (over: Partial<DownloadRequest> = {}): DownloadRequest => ({
    config,
    source: channel.url,
    version: "2.0",
    digest,
    fetch: { idleTimeoutMs: 400 },
    attempts: 2,
    log: (m) => messages.push(m),
    onPeerDropped: (d) => drops.push(d),
    ...over,
  });
  return { config, store, req, messages, drops, a, b: path.join(dir, "b.img") };
}

type Machine = Awaited<ReturnType<typeof machine>>;

async function expectStaged(m: Machine): Promise<void> {
  expect((await m.store.marker("b")).state).toBe("staged");
  expect(await verifyStagedSlot(m.config)).toMatchObject({ ok: true, version: "2.0" });
  expect(readFileSync(m.b).subarray(0, v2.length).equals(v2)).toBe(true);
  // Slot a (running) is never written.
  expect(readFileSync(m.a).equals(Buffer.alloc(2 * MiB))).toBe(true);
}

/** Body bytes of the channel's artifact requests (each logged range is what was asked and sent). */
function channelArtifactBytes(): number {
  return channel.log
    .filter((r) => r.path === "/2.0/2.0.img")
    .reduce((sum, r) => {
      // The fault server answers a range of the whole file with 200 and all of it.
      if (r.status === 200) return sum + v2.length;
      const [from, to] = /bytes=(\d+)-(\d+)/.exec(r.range!)!.slice(1).map(Number) as [
        number,
        number,
      ];
      return sum + Math.min(to, v2.length - 1) - from + 1;
    }, 0);
}

/** A port nothing listens on: a peer that is gone. */
async function deadPort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
  const { port } = s.address() as { port: number };
  await new Promise((r) => s.close(r));
  return port;
}

describe("peers", () => {
  let peer: PeerServer;
  let holder: Machine;
  /** What the server told its onSent hook (the agent's served-bytes metric). */
  let heard = 0;
  beforeAll(async () => {
    holder = await machine();
    await downloadRelease(holder.req());
    await expectStaged(holder);
    peer = await startPeerServer({
      resolve: resolveFromStore(holder.store, "a", (d) => d === digest),
      rate: 64 * MiB,
      port: 0,
      host: "127.0.0.1",
      onSent: (n) => (heard += n),
    });
  });
  afterAll(async () => {
    await peer.close();
  });

  it("a machine takes every chunk from a peer that holds the release staged: the channel sends none", async () => {
    channel.reset();
    const m = await machine();
    const r = await downloadRelease(m.req({ peers: [peer.url] }));
    await expectStaged(m);
    expect(channelArtifactBytes()).toBe(0);
    // The index came from the peer too: the channel sent release.yaml alone.
    expect(channel.log.map((x) => x.path)).toEqual(["/2.0/release.yaml"]);
    expect(r.bytes!.fromPeers).toBe(v2.length);
    expect(peer.served()).toBeGreaterThan(v2.length);
    expect(heard).toBe(peer.served());
    expect(m.drops).toEqual([]);
    expect(m.messages.join("\n")).toContain(`${v2.length} from peers`);
  });

  it("a peer that serves a wrong bit is dropped as a liar; its chunks come from the channel", async () => {
    // The byte at 100 KiB flipped: chunk 25 of 4 KiB fails the index, nothing of it is written.
    faulty.faults.set(faultyPath, { flip: { at: 100 * KiB, times: 100 } });
    const m = await machine();
    const liar = `${faulty.url}/`;
    const r = await downloadRelease(m.req({ peers: [liar] }));
    await expectStaged(m);
    expect(m.drops).toMatchObject([{ peer: liar, fault: "lied", artifact: "rootfs", chunk: 25 }]);
    expect(m.drops[0]!.detail).toMatch(/\(chunk 25\)/);
    // Chunks before 25 came from the liar (verified, and kept though chunk 24 arrived in the
    // same read as the lie), the rest from the channel, once.
    expect(r.bytes!.fromPeers).toBe(25 * INDEX_CHUNK);
    expect(channelArtifactBytes()).toBe(v2.length - r.bytes!.fromPeers!);
    expect(faulty.log.filter((x) => x.path === faultyPath)).toHaveLength(1);
  });

  it("the next peer, not the channel, takes over from a liar", async () => {
    faulty.faults.set(faultyPath, { flip: { at: 0, times: 100 } });
    const m = await machine();
    const r = await downloadRelease(m.req({ peers: [`${faulty.url}/`, peer.url] }));
    await expectStaged(m);
    expect(m.drops.map((d) => d.fault)).toEqual(["lied"]);
    expect(r.bytes!.fromPeers).toBe(v2.length);
    expect(channelArtifactBytes()).toBe(0);
  });

  it.each([
    ["stalls mid-body", { stallAfter: 200 * KiB }, "stalled"],
    ["vanishes mid-body", { drop: { after: 200 * KiB, times: 100 } }, "unreachable"],
    ["answers 500", { status: 500 }, "refused"],
  ] as const)("a peer that %s is dropped and the channel finishes", async (_n, fault, kind) => {
    faulty.faults.set(faultyPath, fault);
    const m = await machine();
    await downloadRelease(m.req({ peers: [`${faulty.url}/`] }));
    await expectStaged(m);
    expect(m.drops).toMatchObject([{ fault: kind, artifact: "rootfs", chunk: expect.any(Number) }]);
    expect(m.messages.join("\n")).toMatch(new RegExp(`peer .* ${kind} .*dropped for this release`));
  });

  it("a peer alive but slow (a trickle inside the idle timer) is dropped as slow; the channel finishes", async () => {
    // 8 KiB/s in 16 KiB pieces: a piece every 2 s, inside the 5 s idle timer, for ever.
    faulty.faults.set(faultyPath, { throttle: 8 * KiB });
    const m = await machine();
    const t0 = Date.now();
    const r = await downloadRelease(
      m.req({ peers: [`${faulty.url}/`], fetch: { idleTimeoutMs: 5_000 } }),
    );
    await expectStaged(m);
    expect(m.drops).toMatchObject([
      { fault: "slow", artifact: "rootfs", chunk: expect.any(Number) },
    ]);
    expect(m.drops[0]!.detail).toMatch(/bytes\/s over the last 1\d s, below the floor of 65536/);
    expect(m.messages.join("\n")).toMatch(/peer .* slow .*dropped for this release/);
    // Dropped after one window, not after the hours the trickle would take.
    expect(Date.now() - t0).toBeLessThan(PEER_SLOW_WINDOW_MS + 20_000);
    expect(channelArtifactBytes()).toBe(v2.length - r.bytes!.fromPeers!);
  }, 90_000);

  it("every peer gone: the channel serves it all", async () => {
    const m = await machine();
    const gone = [`http://127.0.0.1:${await deadPort()}/`, `http://127.0.0.1:${await deadPort()}/`];
    const r = await downloadRelease(m.req({ peers: gone }));
    await expectStaged(m);
    expect(m.drops.map((d) => d.fault)).toEqual(["unreachable", "unreachable"]);
    // Both failed on the chunk index, the first thing asked of a peer: no chunk was refused.
    expect(m.drops.map((d) => [d.artifact, d.chunk])).toEqual([
      ["rootfs", undefined],
      ["rootfs", undefined],
    ]);
    expect(r.bytes!.fromPeers).toBe(0);
    expect(channelArtifactBytes()).toBe(v2.length);
  });

  it.each([
    [
      "a release the Cluster does not trust",
      "other",
      "rootfs",
      undefined,
      403,
      "LIKEN_PEER_NOT_TRUSTED",
    ],
    ["a release no slot holds", "held-not", "rootfs", undefined, 404, "LIKEN_PEER_NOT_HELD"],
    ["an artifact the release lacks", "2.0", "kernel", undefined, 404, "LIKEN_PEER_NO_ARTIFACT"],
    ["a range past the end", "2.0", "rootfs", `bytes=${v2.length}-`, 416, "LIKEN_PEER_BAD_RANGE"],
    ["two ranges", "2.0", "rootfs", "bytes=0-1,5-9", 416, "LIKEN_PEER_BAD_RANGE"],
  ])("the peer server refuses %s", async (_n, which, artifact, range, status, code) => {
    const d =
      which === "2.0"
        ? digest
        : which === "other"
          ? `sha256:${"1".repeat(64)}`
          : `sha256:${"2".repeat(64)}`;
    const p = await startPeerServer({
      resolve: resolveFromStore(
        holder.store,
        "a",
        (x) => x === digest || x === `sha256:${"2".repeat(64)}`,
      ),
      rate: 64 * MiB,
      port: 0,
      host: "127.0.0.1",
    });
    try {
      const res = await fetch(new URL(peerArtifactPath(d, artifact), p.url), {
        headers: range ? { range } : {},
      });
      expect(res.status).toBe(status);
      expect(((await res.json()) as { code: string }).code).toBe(code);
      expect(p.served()).toBe(0);
    } finally {
      await p.close();
    }
  });

  it("the peer server answers a range with exactly those bytes of the staged slot", async () => {
    const res = await fetch(new URL(peerArtifactPath(digest, "rootfs"), peer.url), {
      headers: { range: "bytes=4096-8191" },
    });
    expect(res.status).toBe(206);
    expect(res.headers.get("content-range")).toBe(`bytes 4096-8191/${v2.length}`);
    expect(Buffer.from(await res.arrayBuffer()).equals(v2.subarray(4096, 8192))).toBe(true);
    const bad = await fetch(new URL("v1/other", peer.url));
    expect(bad.status).toBe(400);
  });
});
