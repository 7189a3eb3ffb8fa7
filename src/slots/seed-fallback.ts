// Why a seeded download cannot go on (./seeded.ts): the plan is unusable (a server that ignores
// or caps Range, a wrong Content-Range, bytes that do not match the index, a final digest that
// differs), and the caller downloads the rest in full (./adaptive.ts). Its own module so that
// the pieces of the seeded writer (the chunker, the peer judge) can throw it without importing
// the writer.

/** The adaptive download cannot go on; `restart` when nothing written can be kept. */
export class SeedFallback extends Error {
  constructor(
    readonly reason: string,
    readonly restart = false,
  ) {
    super(reason);
  }
}

/**
 * The channel answered a Range with the whole artifact (HTTP 200): no range of it can be had,
 * so the download says so once and takes every artifact whole from here (./index-fetch.ts).
 */
export class RangeIgnored extends SeedFallback {}

/** The start of the child's log line that says the channel ignores Range (read by the agent,
 * src/agent/download-notice.ts, which makes it a RangeIgnored Event). */
export const RANGE_IGNORED_NOTICE = "range-ignored";

/** A fetched chunk whose hash is not the index's: from a peer, the peer lied. */
export class ChunkMismatch extends SeedFallback {
  constructor(
    reason: string,
    /** The chunk whose bytes were wrong (the index's number). */
    readonly chunk: number,
  ) {
    super(reason);
  }
}
