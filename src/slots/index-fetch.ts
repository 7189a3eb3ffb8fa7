// The artifact's chunk index for the adaptive download (./adaptive.ts), checked against
// release.yaml wherever it comes from: from the index pages and the pack when the machine is on
// its own (the pages fetched in proportion to the change, a sample first deciding whether the
// rest is worth it), else kept in the target slot from an earlier attempt, else from a peer,
// else the plain index from the channel. Any fault says why in a log line and answers
// undefined: the artifact is downloaded in full.
import { isLikenError } from "../errors.js";
import { ChunkIndex } from "../verify/chunk-index.js";
import { digestOf } from "../verify/digest.js";
import { fetchDocument } from "../verify/fetch.js";
import { artifactUrl, type Artifact } from "../verify/release.js";
import { zstd } from "../verify/zstd.js";
import { fetchPaged } from "./paged-index.js";
import { PEER_IDLE_TIMEOUT_MS, peerFault } from "./peer-judge.js";
import { heldOf, MIN_REUSE, runningKept } from "./running-seed.js";
import { RANGE_IGNORED_NOTICE } from "./seed-fallback.js";
import type { SeedContext } from "./seed-context.js";
import type { SeedStats } from "./seed-job.js";

/**
 * The artifact's index from the first peer that has it, checked against release.yaml: every
 * machine fetching it from the channel would cost the channel about 1 % of a copy each. A peer
 * that kept none (404) stays a source of chunks; one that sends another index lied.
 */
async function indexFromPeers(ctx: SeedContext, a: Artifact): Promise<Buffer | undefined> {
  const peers = ctx.peers;
  if (peers === undefined || a.index === undefined) return undefined;
  for (const peer of peers.live()) {
    try {
      const b = await fetchDocument(peers.indexUrl(peer, a.name), a.index.size, {
        idleTimeoutMs: PEER_IDLE_TIMEOUT_MS,
      });
      if (digestOf(b) === a.index.digest) {
        peers.count(peer, b.length);
        return b;
      }
      peers.drop({
        peer,
        fault: "lied",
        artifact: a.name,
        detail: `the index of ${a.name} it sent has digest ${digestOf(b)}, release.yaml says ${a.index.digest}`,
      });
    } catch (e) {
      if ((e as Error)?.name === "AbortError") throw e;
      const fault = peerFault(e);
      if (fault !== "refused") {
        peers.drop({ peer, fault, detail: (e as Error).message, artifact: a.name });
      }
    }
  }
  return undefined;
}

/**
 * The index from its pages (./paged-index.ts) and the frames of the pack; undefined (and a
 * log line) when the release has none or they are refused: the plain index is fetched then.
 */
async function pagedIndex(
  ctx: SeedContext,
  a: Artifact,
  stats: SeedStats,
): Promise<ChunkIndex | "not-worth" | undefined> {
  if (a.indexTop === undefined || a.pack === undefined) return undefined;
  try {
    // Read while the top index and the sample travel.
    void runningKept(ctx);
    // The resume of an artifact begun adaptively needs the whole index: no sample then.
    const paged = await fetchPaged(ctx, a, stats, async (chunks) => {
      if ((await ctx.store.release(ctx.target)) !== undefined) return true;
      return (await heldOf(ctx, chunks)) >= (MIN_REUSE / 2) * chunks.length;
    });
    if (paged === "not-worth") {
      ctx.log?.(
        `artifact ${a.name}: a sample of its index pages finds almost nothing of it locally; downloading in full`,
      );
      return "not-worth";
    }
    // Without the codec (a build that does not carry zstd.wasm) the frames are of no use: the
    // plain index then. Loaded only here, once the download is adaptive (a full download
    // does not pay for instantiating the WebAssembly).
    await zstd();
    (ctx.frames ??= new Map()).set(a.name, paged.frames);
    ctx.log?.(
      `artifact ${a.name}: index from ${paged.reusedPages} kept and ${paged.fetchedPages} fetched page(s)`,
    );
    return paged.index;
  } catch (e) {
    if ((e as Error)?.name === "AbortError") throw e;
    if (isLikenError(e, "LIKEN_VERIFY_RANGE_IGNORED")) {
      ignoresRange(ctx, e.message);
      return "not-worth";
    }
    ctx.log?.(
      `artifact ${a.name}: index pages refused (${(e as Error).message}); the plain index ${a.index!.path} is fetched and chunks travel plain`,
    );
    return undefined;
  }
}

/**
 * The channel answered a Range with the whole file: said once (the log line the Machine's
 * Event quotes, src/agent/download-notice.ts), then every artifact is fetched whole.
 */
export function ignoresRange(ctx: SeedContext, reason: string): void {
  if (ctx.rangeIgnored !== undefined) return;
  ctx.rangeIgnored = reason;
  ctx.log?.(
    `${RANGE_IGNORED_NOTICE}: ${reason}; every artifact is fetched whole, once. A server that answers Range with 206 (liken channel serve, nginx, Caddy, Apache, S3) sends only the change (docs/day-1.md, "A server for the channel")`,
  );
}

/** Fetches and checks the artifact's index; undefined (and a log line) when it cannot be used. */
export async function fetchIndex(
  ctx: SeedContext,
  a: Artifact,
  stats: SeedStats,
): Promise<ChunkIndex | undefined> {
  if (a.index === undefined) return undefined;
  const what = `artifact ${a.name}: index ${a.index.path}`;
  // With live peers the index comes from them, as the chunks do: the channel then sends
  // release.yaml alone, and what no peer gives travels plain from the channel (docs/peers.md).
  // Pages and packs are the channel's way of sending less, for a machine on its own.
  if ((ctx.peers?.live().length ?? 0) === 0) {
    // The channel ignores Range: an index would only plan ranges it does not give.
    if (ctx.rangeIgnored !== undefined) return undefined;
    const paged = await pagedIndex(ctx, a, stats);
    if (paged === "not-worth") return undefined;
    if (paged !== undefined) return paged;
  }
  try {
    let bytes = await ctx.store.keptIndex(ctx.target, a.name);
    if (bytes === undefined || digestOf(bytes) !== a.index.digest) {
      bytes = await indexFromPeers(ctx, a);
      if (bytes === undefined) {
        bytes = await fetchDocument(
          artifactUrl(ctx.base, { name: a.name, path: a.index.path }),
          a.index.size,
        );
        stats.fetched += bytes.length;
        if (digestOf(bytes) !== a.index.digest) {
          ctx.log?.(
            `${what} has digest ${digestOf(bytes)}, release.yaml says ${a.index.digest}; downloading in full`,
          );
          return undefined;
        }
      }
      await ctx.store.keepIndex(ctx.target, a.name, bytes);
    }
    return ChunkIndex.parse(bytes, a.size, what);
  } catch (e) {
    ctx.log?.(`${(e as Error).message}; downloading in full`);
    return undefined;
  }
}
