// How the seeded writer (./seeded.ts) judges a peer it fetches from (docs/peers.md, "A dropped
// peer"): how long a silent peer is waited for, how slow a live one may be before it is
// dropped (a window below a floor set by the channel's rate), and what each failure is called.
// Pure but for the clock the caller measures with; table-tested in test/unit/peer-slow.test.ts.
import { LikenError } from "../errors.js";
import type { PeerFault } from "./peer-sources.js";
import { ChunkMismatch, SeedFallback } from "./seed-fallback.js";

/**
 * A peer is on the cluster's network: 5 s without a byte is a stall there (the channel's 30 s
 * allows for a loaded CDN edge), and the chunk is fetched from the next source at once.
 */
export const PEER_IDLE_TIMEOUT_MS = 5_000;

/**
 * A peer alive but slow (a failing disk, a saturated NIC) sends just often enough to beat the
 * idle timer and would hold the download for hours: over each window of this length, a peer
 * must deliver at least its floor (peerFloorBps), or it is dropped (`slow`) and its chunks go
 * to the next source. Ten seconds: long enough that one hiccup is not judged, short against a
 * download of minutes.
 */
export const PEER_SLOW_WINDOW_MS = 10_000;

/** The floor when the channel has not been measured yet: one 64 KiB piece a second. */
export const PEER_MIN_BPS = 64 * 1024;

/** "Far below the channel": a peer slower than a sixteenth of what the channel delivers. */
export const PEER_SLOW_FRACTION = 1 / 16;

/** The least a peer must deliver a second, given what the channel delivered (if measured). */
export function peerFloorBps(channelBps: number | undefined): number {
  return Math.max(PEER_MIN_BPS, (channelBps ?? 0) * PEER_SLOW_FRACTION);
}

/**
 * Whether a peer that sent `bytes` over `ms` (at least PEER_SLOW_WINDOW_MS) is too slow to
 * keep: below its floor. Undefined while the window is not full yet (nothing to judge).
 */
export function peerTooSlow(o: {
  bytes: number;
  ms: number;
  channelBps: number | undefined;
}): { bps: number; floor: number } | undefined {
  if (o.ms < PEER_SLOW_WINDOW_MS) return undefined;
  const bps = (o.bytes / o.ms) * 1000;
  const floor = peerFloorBps(o.channelBps);
  return bps < floor ? { bps, floor } : undefined;
}

/** A peer that delivered below its floor over a window (peerTooSlow). */
export class PeerTooSlow extends SeedFallback {}

/** How a peer's failure is named: a wrong chunk is a lie, the rest say what the wire did. */
export function peerFault(e: unknown): PeerFault {
  if (e instanceof ChunkMismatch) return "lied";
  if (e instanceof PeerTooSlow) return "slow";
  if (e instanceof SeedFallback) return "refused";
  if (e instanceof LikenError && e.code === "LIKEN_VERIFY_STALLED") return "stalled";
  if (e instanceof LikenError && e.code === "LIKEN_VERIFY_HTTP_STATUS") return "refused";
  return "unreachable";
}

/** Each peer's pace over the download of one artifact, judged window by window. */
export class PeerPace {
  /** Each peer's current throughput window: bytes delivered, ms spent waiting on it. */
  private readonly pace = new Map<string, { bytes: number; ms: number }>();

  /** `channelBps`: what the channel delivers now (undefined until measured). */
  constructor(private readonly channelBps: () => number | undefined) {}

  /**
   * Adds what a peer just delivered to its window (time spent waiting on it, across ranges:
   * a slow peer given many small ranges is judged as one given a long one), and throws
   * PeerTooSlow when a full window fell below the floor.
   */
  add(peer: string, url: URL, bytes: number, ms: number): void {
    const w = this.pace.get(peer) ?? { bytes: 0, ms: 0 };
    w.bytes += bytes;
    w.ms += ms;
    this.pace.set(peer, w);
    const slow = peerTooSlow({ ...w, channelBps: this.channelBps() });
    if (w.ms >= PEER_SLOW_WINDOW_MS) this.pace.set(peer, { bytes: 0, ms: 0 });
    if (slow === undefined) return;
    throw new PeerTooSlow(
      `GET ${url.href}: ${Math.round(slow.bps)} bytes/s over the last ${Math.round(w.ms / 1000)} s, below the floor of ${Math.round(slow.floor)} bytes/s (a sixteenth of what the channel delivers, at least ${PEER_MIN_BPS})`,
    );
  }
}
