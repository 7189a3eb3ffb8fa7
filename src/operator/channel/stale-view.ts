// A channel read older than the one the Cluster records, pure. A copy's channel read waits for
// the status write that carries it (operator.ts); meanwhile another copy (two may both believe
// they lead: election.ts) can record a newer read. Written over it, the older read takes the
// fleet back: status.trust.taken goes down to what the channel offered then, the target with
// it, and a revert of the newer release is dropped (found by the simulator, seed 327: a revert
// by request, then a release published; docs/simulation.md). TUF's own rule decides which is
// older, on no clock: the timestamp metadata's version never goes back (a read whose trusted
// timestamp is older than the recorded one is stale, and is not written).
import type { Cluster, TrustStatus } from "../../api/index.js";

/** signed.version of a TUF metadata file's JSON text; undefined when it has none. */
export function metadataVersion(text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  try {
    const v = (JSON.parse(text) as { signed?: { version?: unknown } }).signed?.version;
    return typeof v === "number" && Number.isInteger(v) ? v : undefined;
  } catch {
    return undefined;
  }
}

/** True when `read` (a channel read's trust status) is older than the Cluster records. */
export function staleChannelView(c: Cluster, read: TrustStatus | undefined): boolean {
  const recorded = c.status?.trust;
  if (recorded === undefined || read === undefined) return false;
  if (recorded.rootDigest !== read.rootDigest) return false;
  const was = metadataVersion(recorded.metadata?.timestamp);
  const now = metadataVersion(read.metadata?.timestamp);
  return was !== undefined && now !== undefined && now < was;
}
