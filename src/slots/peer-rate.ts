// The peer server's pace (docs/peers.md, "Serving"): the size of the pieces it sends and the
// lowest rate that can send them. Its own module so that the CLI's option parsing can check a
// rate without loading the server.
import { SlotError } from "./errors.js";

/** Pieces of 64 KiB: small enough that the bucket paces smoothly, large enough for few reads. */
export const PEER_PIECE = 64 * 1024;

/**
 * The lowest rate a peer server takes: one piece a second. The token bucket holds one second's
 * worth, so below this a piece could never be taken and the server would send nothing at all.
 */
export const MIN_PEER_RATE = PEER_PIECE;

/** A serving rate, or why it cannot be one (the CLI's --rate and startPeerServer). */
export function checkPeerRate(rate: number, said = `${rate} bytes/s`): SlotError | undefined {
  if (Number.isSafeInteger(rate) && rate >= MIN_PEER_RATE) return undefined;
  return new SlotError(
    "LIKEN_SLOT_PEER_RATE_TOO_LOW",
    `peer serving rate ${said} is below the minimum of 64 KiB/s: the server sends pieces of 64 KiB and its bucket holds one second's worth, so it would never send a byte; give a rate of 64KiB or more (docs/peers.md, "Serving")`,
    { context: { rate, minimum: MIN_PEER_RATE } },
  );
}
