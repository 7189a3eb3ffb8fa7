// A peer that lies, on the real control plane with the real operator and agents: the first
// machine stages the new release and serves it, then its staged slot's rootfs is corrupted on
// disk (one chunk's bytes flipped: what a failing disk does after the read-back passed). The
// operator assigns it as the second machine's source; the second takes the chunks before the
// bad one from it, refuses the bad one (a PeerDropped Event naming the peer, the chunk and the
// hash mismatch; liken_peer_chunks_refused_total{reason="lied"} on its metrics), fetches the
// rest from the channel, and stages the release verified, its running slot untouched.
import { open, stat } from "node:fs/promises";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { INDEX_CHUNK } from "../../src/verify/chunk-index.js";
import { total } from "../support/metrics.js";
import {
  agentSamples,
  assignmentOf,
  expectReadsBack,
  fileDigest,
  firstServes,
  peerDroppedEvents,
  peersFleet,
  releaseOf,
  staged,
} from "./peers-support.js";

const tag = Date.now().toString(36);
const M1 = `pl1-${tag}`;
const M2 = `pl2-${tag}`;
/** The rootfs chunk whose bytes the first machine's disk corrupts (of 48: the kernel and
 * about half the rootfs come from the peer before it). */
const BAD_CHUNK = 25;

/** Flips `n` bytes of `file` at `at` in place, as a failing disk returns them. */
async function flip(file: string, at: number, n: number): Promise<void> {
  const fh = await open(file, "r+");
  try {
    const b = Buffer.alloc(n);
    await fh.read(b, 0, n, at);
    for (let i = 0; i < n; i++) b[i] = b[i]! ^ 0xff;
    await fh.write(b, 0, n, at);
    await fh.sync();
  } finally {
    await fh.close();
  }
}

describe("a peer that lies: its bad chunk is refused, the release staged from elsewhere", () => {
  const { fleet, next } = peersFleet();

  it("refuses the peer's wrong chunk, reports it, and stages the release verified", async () => {
    const v2 = next();
    const doc = await releaseOf(fleet, v2);
    const rootfs = doc.artifacts.find((a) => a.name === "rootfs")!;
    const first = await firstServes(fleet, M1, v2);
    const held = (await fleet.api.machines.get(M1)).status!.staged!;
    expect(held.digest).toBe(v2.digest);
    await flip(first.machine.slotFile(held.slot), rootfs.offset + BAD_CHUNK * INDEX_CHUNK + 100, 8);

    const m2 = await fleet.addMachine({ name: M2, role: "Worker", rebootPolicy: "Manual" });
    const assigned = await assignmentOf(fleet, M2, v2);
    expect(assigned.peers).toEqual([first.url]);
    const running = m2.slotFile("a");
    const runningBefore = await fileDigest(running);
    m2.powerOn();
    await staged(fleet, M2, v2);

    const s = (await fleet.api.machines.get(M2)).status!;
    expect(s.staged).toMatchObject({ digest: v2.digest, slot: "b" });
    await expectReadsBack(m2.slotFile("b"), doc);
    expect(await fileDigest(running)).toBe(runningBefore);

    // The peer sent the kernel and rootfs up to the bad chunk (each chunk before it kept, though
    // many arrive in the read that brings the lie); the channel the rest once, as zstd frames
    // of random bytes (a frame is its chunk plus at most 16 bytes), the index's top and pages
    // (docs/releases.md, "Packs and index pages"), and release.yaml (twice: the agent reads it
    // for the download's size, the download child to verify).
    const second = fleet.channel!.bytesServed(first.prefix) - first.firstCopy;
    const yaml = 2 * (await stat(path.join(fleet.channelDir, v2.version, "release.yaml"))).size;
    const index = doc.artifacts.reduce(
      (n, a) => n + (a.indexTop?.size ?? 0) + (a.indexPages?.size ?? 0),
      0,
    );
    const rest = rootfs.size - BAD_CHUNK * INDEX_CHUNK;
    expect(second).toBeGreaterThanOrEqual(rest);
    expect(second).toBeLessThanOrEqual(rest + 16 * (rest / INDEX_CHUNK) + index + yaml);

    const events = await peerDroppedEvents(M2);
    expect(events).toHaveLength(1);
    expect(events[0]!.message).toContain(
      `peer ${first.url} dropped for ${v2.version} (lied on chunk ${BAD_CHUNK} of rootfs)`,
    );
    expect(events[0]!.message).toContain(`(chunk ${BAD_CHUNK})`);
    expect(events[0]!.message).toContain("the index says sha256:");

    const m = await agentSamples(m2);
    expect(total(m, "liken_peer_chunks_refused_total", { reason: "lied" })).toBe(1);
    expect(total(m, "liken_peers_dropped_total", { reason: "lied" })).toBe(1);
    expect(total(m, "liken_peer_chunks_refused_total")).toBe(1);
  }, 360_000);
});
