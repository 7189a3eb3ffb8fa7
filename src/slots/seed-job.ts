// What the seeded writer (./seeded.ts) is given for one artifact, and what it counts: the
// plan, the devices, the peers and the pack, and the bytes reused, fetched and refused. Its own
// module so that the writer's pieces (the pack reader) and the callers (./adaptive.ts,
// ./paged-index.ts, ./stage.ts) share the shapes without importing the writer.
import type { ChunkIndex } from "../verify/chunk-index.js";
import type { FrameTable } from "../verify/index-pages.js";
import type { ArtifactJob } from "./artifact.js";
import type { PeerSet } from "./peer-sources.js";
import type { Plan } from "./seed-plan.js";

export interface SeedStats {
  /** Bytes copied from a local disk (checked against the index). */
  reused: number;
  /** Bytes received from the channel for this artifact (index included by the caller). */
  fetched: number;
  /** Range requests sent. */
  requests: number;
  /** Local chunks that did not match the index and were fetched instead. */
  corrupt: number;
  /** Bytes received from peers that passed the index check (docs/peers.md). */
  fromPeers?: number;
  /** Pack frames refused (did not decode, or decoded to another hash), each fetched again. */
  badFrames?: number;
}

export interface SeededJob {
  /** A whole-stream job: the artifact without `chunks`, so resume points carry hash state. */
  job: ArtifactJob;
  index: ChunkIndex;
  plan: Plan;
  devices: { running: string; target: string };
  stats: SeedStats;
  /** Peers to take remote ranges from before the channel (the release's, shared by artifacts). */
  peers?: PeerSet;
  /** The artifact's pack: channel ranges are fetched as zstd frames from it (./paged-index.ts). */
  pack?: { url: URL; size: number; frames: FrameTable };
}
