// The agent's peer metrics: a dropped peer counts by its fault, and a refused chunk only when
// the peer failed on a chunk (not on an artifact's chunk index); every reason has a series;
// the bytes its own peer server sent.
import { describe, expect, it } from "vitest";
import { agentMetrics } from "../../src/agent/metrics.js";
import { PEER_FAULTS, type PeerDrop } from "../../src/slots/peer-sources.js";
import { parseExposition, total } from "../support/metrics.js";

const peer = "http://10.0.0.8:7450/";
const scrape = async () => parseExposition(await agentMetrics.registry.metrics());
const REFUSED = "liken_peer_chunks_refused_total";
const DROPPED = "liken_peers_dropped_total";

describe("peer metrics", () => {
  it("every reason has a series before the first drop", async () => {
    const s = await scrape();
    for (const reason of PEER_FAULTS) {
      expect(s.filter((x) => x.name === REFUSED && x.labels.reason === reason)).toHaveLength(1);
      expect(s.filter((x) => x.name === DROPPED && x.labels.reason === reason)).toHaveLength(1);
    }
  });

  it("counts the bytes this machine's peer server sent", async () => {
    const name = "liken_peer_served_bytes_total";
    const before = total(await scrape(), name);
    agentMetrics.peerServed(65536);
    agentMetrics.peerServed(724);
    expect(total(await scrape(), name) - before).toBe(65536 + 724);
  });

  it.each<[string, PeerDrop, number, number]>([
    ["a wrong chunk", { peer, fault: "lied", detail: "d", artifact: "rootfs", chunk: 3 }, 1, 1],
    ["a wrong index", { peer, fault: "lied", detail: "d", artifact: "rootfs" }, 0, 1],
    [
      "a stall mid-chunk",
      { peer, fault: "stalled", detail: "d", artifact: "kernel", chunk: 0 },
      1,
      1,
    ],
    ["gone at the index", { peer, fault: "unreachable", detail: "d", artifact: "kernel" }, 0, 1],
    [
      "a refused range",
      { peer, fault: "refused", detail: "d", artifact: "kernel", chunk: 7 },
      1,
      1,
    ],
  ])("%s", async (_n, d, refused, dropped) => {
    const before = await scrape();
    agentMetrics.peerDropped(d);
    const after = await scrape();
    const delta = (name: string, reason: string) =>
      total(after, name, { reason }) - total(before, name, { reason });
    expect(delta(REFUSED, d.fault)).toBe(refused);
    expect(delta(DROPPED, d.fault)).toBe(dropped);
    for (const other of PEER_FAULTS.filter((f) => f !== d.fault)) {
      expect(delta(REFUSED, other)).toBe(0);
      expect(delta(DROPPED, other)).toBe(0);
    }
  });
});
