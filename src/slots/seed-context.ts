// What the adaptive download of one release shares across its artifacts (./adaptive.ts): the
// slots, the release and where it comes from, and what is learned once and used by every
// artifact (the running slot's map and kept indexes, the peers, the packs' frames). Its own
// module so that the pieces of the download (./running-seed.ts, ./index-fetch.ts) take it
// without importing the download.
import type { ChunkIndex } from "../verify/chunk-index.js";
import type { FrameTable } from "../verify/index-pages.js";
import type { Release } from "../verify/release.js";
import type { SlotName } from "./config.js";
import type { PeerSet } from "./peer-sources.js";
import type { SeedMap } from "./seed-map.js";
import type { IndexingProgress, SlotStore } from "./store.js";

/** A kept index of the running slot and where its artifact starts on the device. */
export interface Kept {
  index: ChunkIndex;
  offset: number;
}

export interface SeedContext {
  store: SlotStore;
  running: SlotName;
  target: SlotName;
  release: Release;
  base: URL;
  log?: (m: string) => void;
  /** Built on first use, shared by the release's artifacts. */
  seed?: SeedMap;
  /** Peers that hold the release (docs/peers.md): remote ranges go to them first. */
  peers?: PeerSet;
  /** Each packed artifact's frames (./paged-index.ts), by artifact name: its chunks come
   * compressed from the pack. */
  frames?: Map<string, FrameTable>;
  /** The running release's kept indexes, read once (see runningKept). */
  kept?: Promise<Kept[] | undefined>;
  /**
   * Why the channel's ranges cannot be had (it answered a Range with the whole file, HTTP 200),
   * once seen: every later artifact is fetched whole, with one request and no index, since each
   * range would bring the whole file again (./index-fetch.ts).
   */
  rangeIgnored?: string;
  /** Hears how an index pass over the running slot goes (./running-index.ts), to show it. */
  onIndexing?: (i: IndexingProgress) => Promise<void>;
  /** Bytes between an index pass's checkpoints (default INDEX_PASS_EVERY, ./index-pass.ts). */
  indexEvery?: number;
}

export type { IndexingProgress };
