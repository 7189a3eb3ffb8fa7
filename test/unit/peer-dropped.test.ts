// The download child's peer-dropped lines, as the daemon reads them for the PeerDropped Event.
import { describe, expect, it } from "vitest";
import { parsePeerDropped, peerDroppedMessage } from "../../src/agent/peer-dropped.js";
import type { PeerDrop } from "../../src/slots/peer-sources.js";

const drop: PeerDrop = {
  peer: "http://10.0.0.8:7450/",
  fault: "lied",
  detail: "kernel chunk 3 hash mismatch",
  artifact: "kernel",
  chunk: 3,
};
const line = (d: object): string => `liken: peer-dropped ${JSON.stringify(d)}`;
const { artifact: _a, chunk: _c, ...bare } = drop;

describe("parsePeerDropped", () => {
  it.each([
    ["a drop on a chunk", line(drop), drop],
    ["a drop on an index", line({ ...bare, artifact: "kernel" }), { ...bare, artifact: "kernel" }],
    ["a drop without where (an older child)", line(bare), bare],
    [
      "a chunk that is no chunk number",
      line({ ...drop, chunk: -1 }),
      { ...bare, artifact: "kernel" },
    ],
    ["another log line", "liken: fetched 3 chunks", undefined],
    ["garbled JSON", "liken: peer-dropped {peer", undefined],
    ["JSON that is no object", "liken: peer-dropped null", undefined],
    ["an unknown fault", line({ ...drop, fault: "odd" }), undefined],
    ["a missing detail", line({ peer: "p", fault: "lied" }), undefined],
  ] as const)("%s", (_n, l, want) => {
    expect(parsePeerDropped(l)).toEqual(want);
  });
});

describe("peerDroppedMessage", () => {
  it.each([
    [
      "a chunk",
      drop,
      "peer http://10.0.0.8:7450/ dropped for 2026.10.11-001 (lied on chunk 3 of kernel): kernel chunk 3 hash mismatch; its chunks are fetched from other peers or the channel",
    ],
    [
      "an index",
      { ...bare, artifact: "kernel" },
      "peer http://10.0.0.8:7450/ dropped for 2026.10.11-001 (lied on the index of kernel): kernel chunk 3 hash mismatch; its chunks are fetched from other peers or the channel",
    ],
    [
      "nothing said of where",
      bare,
      "peer http://10.0.0.8:7450/ dropped for 2026.10.11-001 (lied): kernel chunk 3 hash mismatch; its chunks are fetched from other peers or the channel",
    ],
  ] as const)("names the peer, the fault, where (%s) and what happens next", (_n, d, want) => {
    expect(peerDroppedMessage("2026.10.11-001", d)).toBe(want);
  });
});
