// Slot metadata on disk, one directory per slot under the config's stateDir:
//   slot-<x>/marker.json    the marker (written last, atomically, synced)
//   slot-<x>/release.yaml   the staged release document, byte for byte as the catalog names it
//   slot-<x>/progress.json  resume points of a download in progress
//   slot-<x>/index/<artifact>.lkidx  the chunk indexes of the release written there (or, for
//                                    the installed slot, that the installer kept)
//   slot-<x>/index/<artifact>.pass*  an index pass over the running slot (./index-pass.ts)
import { readFileSync } from "node:fs";
import { mkdir, rm } from "node:fs/promises";
import path from "node:path";
import { removeDurably, writeFileAtomic } from "./atomic.js";
import type { AgentSlotsConfig, SlotName } from "./config.js";
import { decodeMarker, encodeMarker, nextMarker, type Marker, type MarkerEvent } from "./marker.js";

/**
 * An index pass over the running slot, as the download's progress file shows it (the agent
 * puts it in the Machine's status as the stage Indexing, and the note in an Event).
 */
export interface IndexingProgress {
  slot: SlotName;
  /** The artifact being indexed. */
  artifact: string;
  /** Bytes of the running slot indexed, of all that this download must index. */
  done: number;
  total: number;
  /** Why the slot is indexed, or what the pass found: its bytes differ from its release. */
  note?: string;
}

export interface ArtifactProgress {
  /** Bytes of the artifact durable on the medium. */
  offset: number;
  /** Base64 SHA-256 state of those bytes (artifacts without chunks). */
  hashState?: string;
  done?: boolean;
  /** Adaptive downloads: bytes copied from local disks and bytes fetched, so far. */
  reused?: number;
  fetched?: number;
}

export interface Progress {
  releaseDigest: string;
  artifacts: Record<string, ArtifactProgress>;
  /** An index pass over the running slot this download needs (./running-index.ts). */
  indexing?: IndexingProgress;
}

/**
 * A small file, or undefined when it does not exist. Synchronous on purpose: the agent reads
 * both markers every loop turn, and an async read is four trips through libuv's thread pool
 * (open, stat, read, close), each waking two threads, for a few hundred bytes of page cache.
 */
async function readOptional(file: string): Promise<Buffer | undefined> {
  try {
    return readFileSync(file);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw e;
  }
}

/** Where a slot's kept index of `artifact` lives, under its slot-<x>/ (the installer writes it too). */
export function keptIndexPath(artifact: string): string {
  return path.join("index", `${artifact}.lkidx`);
}

export class SlotStore {
  constructor(readonly config: AgentSlotsConfig) {}

  dir(slot: SlotName): string {
    return path.join(this.config.stateDir, `slot-${slot}`);
  }

  device(slot: SlotName): string {
    return this.config.slots[slot].device;
  }

  async marker(slot: SlotName): Promise<Marker> {
    const b = await readOptional(path.join(this.dir(slot), "marker.json"));
    return decodeMarker(b?.toString("utf8"));
  }

  /** Applies one transition and makes it durable before returning. */
  async transition(slot: SlotName, e: MarkerEvent): Promise<Marker> {
    const next = nextMarker(await this.marker(slot), e);
    await mkdir(this.dir(slot), { recursive: true });
    await writeFileAtomic(path.join(this.dir(slot), "marker.json"), encodeMarker(next));
    return next;
  }

  async release(slot: SlotName): Promise<Buffer | undefined> {
    return readOptional(path.join(this.dir(slot), "release.yaml"));
  }

  async writeRelease(slot: SlotName, bytes: Uint8Array): Promise<void> {
    await writeFileAtomic(path.join(this.dir(slot), "release.yaml"), bytes);
  }

  /** A chunk index kept for the slot's release (checked against its digest by the reader). */
  async keptIndex(slot: SlotName, artifact: string): Promise<Buffer | undefined> {
    return readOptional(this.keptIndexFile(slot, artifact));
  }

  /** Where that index is kept (the peer server streams it from there: ./peer-serve.ts). */
  keptIndexFile(slot: SlotName, artifact: string): string {
    return path.join(this.dir(slot), keptIndexPath(artifact));
  }

  /** The folder of the slot's indexes (and of an index pass in progress: ./index-pass.ts). */
  async ensureIndexDir(slot: SlotName): Promise<void> {
    await mkdir(path.join(this.dir(slot), "index"), { recursive: true });
  }

  async keepIndex(slot: SlotName, artifact: string, bytes: Uint8Array): Promise<void> {
    await this.ensureIndexDir(slot);
    await writeFileAtomic(this.keptIndexFile(slot, artifact), bytes);
  }

  /** Drops the slot's kept indexes: what they describe is about to be overwritten. */
  async clearIndexes(slot: SlotName): Promise<void> {
    await rm(path.join(this.dir(slot), "index"), { recursive: true, force: true });
  }

  async progress(slot: SlotName, releaseDigest: string): Promise<Progress> {
    const b = await readOptional(path.join(this.dir(slot), "progress.json"));
    try {
      const p = b ? (JSON.parse(b.toString("utf8")) as Progress) : undefined;
      if (p?.releaseDigest === releaseDigest && typeof p.artifacts === "object") return p;
    } catch {
      // A torn or foreign progress file only costs a download from the start.
    }
    return { releaseDigest, artifacts: {} };
  }

  async saveProgress(slot: SlotName, p: Progress): Promise<void> {
    await writeFileAtomic(path.join(this.dir(slot), "progress.json"), JSON.stringify(p));
  }

  async clearProgress(slot: SlotName): Promise<void> {
    await removeDurably(path.join(this.dir(slot), "progress.json"));
  }
}
