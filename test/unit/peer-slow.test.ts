// When a peer alive but slow is dropped (docs/peers.md, "A dropped peer"): a full window below
// its floor, the floor being a sixteenth of what the channel delivers and at least 64 KiB/s.
import { describe, expect, it } from "vitest";
import {
  PEER_MIN_BPS,
  PEER_SLOW_WINDOW_MS,
  peerFault,
  peerFloorBps,
  peerTooSlow,
  PeerTooSlow,
} from "../../src/slots/seeded.js";

const MiB = 1024 * 1024;
const W = PEER_SLOW_WINDOW_MS;

describe("peerFloorBps", () => {
  it.each<[string, number | undefined, number]>([
    ["channel not measured yet", undefined, PEER_MIN_BPS],
    ["a slow channel: the minimum", 256 * 1024, PEER_MIN_BPS],
    ["a 16 MiB/s channel: a sixteenth", 16 * MiB, MiB],
    ["a 160 MiB/s channel", 160 * MiB, 10 * MiB],
  ])("%s", (_, channel, floor) => {
    expect(peerFloorBps(channel)).toBe(floor);
  });
});

describe("peerTooSlow", () => {
  it.each<[string, number, number, number | undefined, boolean | undefined]>([
    ["a window not full yet is not judged, however slow", 10, W - 1, undefined, undefined],
    ["a few hundred bytes a second over a window", 300 * (W / 1000), W, undefined, true],
    ["just above the minimum", (PEER_MIN_BPS + 1) * (W / 1000), W, undefined, false],
    ["just below the minimum", (PEER_MIN_BPS - 1) * (W / 1000), W, undefined, true],
    ["1 MiB/s against a 64 MiB/s channel: far below", MiB * (W / 1000), W, 64 * MiB, true],
    ["8 MiB/s against a 64 MiB/s channel: kept", 8 * MiB * (W / 1000), W, 64 * MiB, false],
    [
      "a longer window is judged by its rate",
      2 * PEER_MIN_BPS * (W / 1000),
      3 * W,
      undefined,
      true,
    ],
  ])("%s", (_, bytes, ms, channelBps, slow) => {
    const v = peerTooSlow({ bytes, ms, channelBps });
    if (slow === undefined) expect(v).toBeUndefined();
    else expect(v !== undefined).toBe(slow);
  });

  it("is named slow, like the other faults", () => {
    expect(peerFault(new PeerTooSlow("x"))).toBe("slow");
  });
});
