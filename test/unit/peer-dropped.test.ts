// The download child's peer-dropped lines, as the daemon reads them for the PeerDropped Event.
import { describe, expect, it } from "vitest";
import { parsePeerDropped, peerDroppedMessage } from "../../src/agent/peer-dropped.js";
import type { PeerDrop } from "../../src/slots/peer-sources.js";

const drop: PeerDrop = {
  peer: "http://10.0.0.8:7450/",
  fault: "lied",
  detail: "kernel chunk 3 hash mismatch",
};

describe("parsePeerDropped", () => {
  it.each([
    ["a drop", `liken: peer-dropped ${JSON.stringify(drop)}`, drop],
    ["another log line", "liken: fetched 3 chunks", undefined],
    ["garbled JSON", "liken: peer-dropped {peer", undefined],
    [
      "an unknown fault",
      `liken: peer-dropped ${JSON.stringify({ ...drop, fault: "odd" })}`,
      undefined,
    ],
    [
      "a missing detail",
      `liken: peer-dropped ${JSON.stringify({ peer: "p", fault: "lied" })}`,
      undefined,
    ],
  ] as const)("%s", (_n, line, want) => {
    expect(parsePeerDropped(line)).toEqual(want);
  });

  it("the Event message names the peer, the fault, the chunk and what happens next", () => {
    expect(peerDroppedMessage("2026.10.11-001", drop)).toBe(
      "peer http://10.0.0.8:7450/ dropped for 2026.10.11-001 (lied): kernel chunk 3 hash mismatch; its chunks are fetched from other peers or the channel",
    );
  });
});
