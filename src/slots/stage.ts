// Writing a release into the slot that does not run, as named phases:
//   release   fetch release.yaml, check it against the catalog digest and version
//   fit       every artifact fits the slot device
//   withdraw  the marker says nothing is staged, synced, before any byte is written
//   write     each artifact, resuming from saved progress
//   verify    read every artifact back from the medium (O_DIRECT) and hash it
//   stage     the release document, then the marker (last), synced
// A process killed at any point leaves the slot withdrawn (or writing) or staged and fully
// verified; the next run finds the marker and finishes the job.
import { deviceInfo } from "../native/index.js";
import { readback } from "../native/writer.js";
import { digestOf, hexOf } from "../verify/digest.js";
import { fetchDocument, type FetchOptions } from "../verify/fetch.js";
import {
  artifactUrl,
  MAX_RELEASE_BYTES,
  releaseBase,
  verifyRelease,
  type Artifact,
  type Release,
} from "../verify/release.js";
import { fetchIndex, writeAdaptive, type SeedContext } from "./adaptive.js";
import { writeArtifact, type ArtifactJob } from "./artifact.js";
import type { SeedStats } from "./seeded.js";
import { otherSlot, runningSlot, type AgentSlotsConfig, type SlotName } from "./config.js";
import { SlotError } from "./errors.js";
import { planStage } from "./marker.js";
import { PeerSet, type PeerDrop } from "./peer-sources.js";
import { forgetKept } from "./running-index.js";
import type { IndexingProgress } from "./seed-context.js";
import { SlotStore, type Progress } from "./store.js";

export interface DownloadRequest {
  config: AgentSlotsConfig;
  /** Overrides which slot runs (else the config, else /proc/cmdline). */
  running?: string;
  source: string;
  version: string;
  /** The catalog digest of release.yaml: the root of the trust chain. */
  digest: string;
  fetch?: FetchOptions;
  checkpointEvery?: number;
  attempts?: number;
  direct?: boolean;
  log?: (msg: string) => void;
  /** Use the releases' chunk indexes to fetch only what no local disk holds (default true). */
  adaptive?: boolean;
  /**
   * Peers' base URLs to fetch chunks from before the channel (docs/peers.md); used only with
   * the chunk index. `onPeerDropped` hears of each peer dropped for the release, and why.
   */
  peers?: readonly string[];
  onPeerDropped?: (d: PeerDrop) => void;
  /** Hears each checkpoint of an index pass over the running slot (after it is saved). */
  onIndexing?: (i: IndexingProgress) => void | Promise<void>;
}

export interface DownloadResult {
  slot: SlotName;
  version: string;
  digest: string;
  outcome: "staged" | "already-staged";
  /** Bytes fetched and reused (absent when the slot was already staged). */
  bytes?: DownloadBytes;
}

async function phase<T>(
  log: ((m: string) => void) | undefined,
  name: string,
  fn: () => Promise<T>,
): Promise<T> {
  log?.(`${name}: begin`);
  const t = Date.now();
  const r = await fn();
  log?.(`${name}: done in ${Date.now() - t} ms`);
  return r;
}

/**
 * Refuses a release whose artifacts end beyond the slot device, before anything is downloaded
 * or written (the marker is not even withdrawn): a slot image larger than the partition must
 * leave the machine exactly as it was.
 */
export function checkFits(release: Release, device: string, slot: SlotName): void {
  const { size } = deviceInfo(device);
  for (const a of release.artifacts) {
    const need = a.offset + a.size;
    if (need > size) {
      throw new SlotError(
        "LIKEN_SLOT_TOO_SMALL",
        `release ${release.version}: artifact ${a.name} (${a.size} bytes at offset ${a.offset}) needs ` +
          `${need} bytes of slot ${slot}, but ${device} holds ${size} bytes (${need - size} too few); ` +
          `nothing was written. Build the release from an image that fits the slot partition, ` +
          `or give the slots partitions of at least ${need} bytes`,
        { context: { slot, device, artifact: a.name, need, size } },
      );
    }
  }
}

/** Reads every artifact back from the medium; returns the names whose digest differs. */
export async function readBackArtifacts(
  release: Release,
  device: string,
  direct = true,
): Promise<{ name: string; got: string }[]> {
  const bad: { name: string; got: string }[] = [];
  for (const a of release.artifacts) {
    const got = await readback(device, { offset: a.offset, size: a.size, direct });
    if (got !== hexOf(a.digest)) bad.push({ name: a.name, got: `sha256:${got}` });
  }
  return bad;
}

/** What the download fetched and reused, over all its artifacts (and indexes). */
export interface DownloadBytes {
  reused: number;
  /** From the channel. */
  fetched: number;
  requests: number;
  /** From peers, each chunk checked against the index (present when peers were given). */
  fromPeers?: number;
}

/** The job of one artifact: resume point from the progress file, progress saved with stats. */
function artifactJob(
  req: DownloadRequest,
  store: SlotStore,
  slot: SlotName,
  base: URL,
  a: Artifact,
  progress: Progress,
  stats: SeedStats,
): ArtifactJob {
  const p = progress.artifacts[a.name];
  return {
    url: artifactUrl(base, a),
    artifact: a,
    device: store.device(slot),
    ...(p
      ? {
          resume: {
            offset: p.offset,
            ...(p.hashState ? { hashState: Buffer.from(p.hashState, "base64") } : {}),
          },
        }
      : {}),
    onCheckpoint: async (cp) => {
      progress.artifacts[a.name] = {
        offset: cp.offset,
        ...(cp.hashState ? { hashState: cp.hashState.toString("base64") } : {}),
        reused: stats.reused,
        fetched: stats.fetched,
      };
      await store.saveProgress(slot, progress);
    },
    ...(req.checkpointEvery ? { checkpointEvery: req.checkpointEvery } : {}),
    ...(req.attempts ? { attempts: req.attempts } : {}),
    ...(req.fetch ? { fetch: req.fetch } : {}),
    ...(req.direct !== undefined ? { direct: req.direct } : {}),
    ...(req.log ? { log: req.log } : {}),
  };
}

/** One artifact: adaptively when its index can be used, else in full as before. */
async function writeOne(
  req: DownloadRequest,
  ctx: SeedContext,
  job: ArtifactJob,
  stats: SeedStats,
): Promise<void> {
  const from = job.resume;
  // A resume point of a chunked (non-adaptive) write has no hash state: it goes on as it began.
  const resumable = from === undefined || from.offset === 0 || from.hashState !== undefined;
  const index =
    req.adaptive !== false && resumable ? await fetchIndex(ctx, job.artifact, stats) : undefined;
  if (index !== undefined && (await writeAdaptive(ctx, job, index, stats))) return;
  await writeArtifact(job);
  stats.fetched += job.artifact.size - (from?.offset ?? 0);
}

function seedContext(
  req: DownloadRequest,
  store: SlotStore,
  slots: { running: SlotName; target: SlotName },
  release: Release,
  base: URL,
  progress: Progress,
): SeedContext {
  const releaseDigest = progress.releaseDigest;
  return {
    store,
    ...slots,
    release,
    base,
    ...(req.log ? { log: req.log } : {}),
    // The pass's checkpoints follow the download's (tests make both small).
    ...(req.checkpointEvery ? { indexEvery: req.checkpointEvery } : {}),
    onIndexing: async (i) => {
      progress.indexing = i;
      await store.saveProgress(slots.target, progress);
      await req.onIndexing?.(i);
    },
    ...(req.peers?.length
      ? { peers: new PeerSet(req.peers, releaseDigest, req.onPeerDropped) }
      : {}),
  };
}

async function writeAll(
  req: DownloadRequest,
  store: SlotStore,
  slots: { running: SlotName; target: SlotName },
  release: Release,
  releaseDigest: string,
): Promise<DownloadBytes> {
  const slot = slots.target;
  const base = releaseBase(req.source, release.version);
  const progress: Progress = await store.progress(slot, releaseDigest);
  const ctx = seedContext(req, store, slots, release, base, progress);
  const total: DownloadBytes = { reused: 0, fetched: 0, requests: 0 };
  for (const a of release.artifacts) {
    const p = progress.artifacts[a.name];
    const stats: SeedStats = {
      reused: p?.reused ?? 0,
      fetched: p?.fetched ?? 0,
      requests: 0,
      corrupt: 0,
    };
    if (!p?.done)
      await writeOne(req, ctx, artifactJob(req, store, slot, base, a, progress, stats), stats);
    if (stats.corrupt > 0) await forgetKept(ctx, a.name, stats.corrupt);
    total.reused += stats.reused;
    total.fetched += stats.fetched;
    total.requests += stats.requests;
    if (ctx.peers) total.fromPeers = (total.fromPeers ?? 0) + (stats.fromPeers ?? 0);
    if (p?.done) continue;
    progress.artifacts[a.name] = {
      offset: a.size,
      done: true,
      reused: stats.reused,
      fetched: stats.fetched,
    };
    await store.saveProgress(slot, progress);
  }
  return total;
}

export async function downloadRelease(req: DownloadRequest): Promise<DownloadResult> {
  const log = req.log;
  const store = new SlotStore(req.config);
  const slot = otherSlot(await runningSlot(req.config, req.running));
  const device = store.device(slot);
  const want = { version: req.version, releaseDigest: req.digest };

  const base = releaseBase(req.source, req.version);
  const bytes = await phase(log, "release", () =>
    fetchDocument(new URL("release.yaml", base), MAX_RELEASE_BYTES, req.fetch),
  );
  const release = verifyRelease(bytes, { version: req.version, digest: req.digest });
  checkFits(release, device, slot);

  const plan = planStage(await store.marker(slot), want);
  if (plan === "done")
    return { slot, version: req.version, digest: req.digest, outcome: "already-staged" };
  if (plan === "withdraw-and-write") {
    await phase(log, "withdraw", async () => {
      await store.transition(slot, { type: "withdraw" });
      await store.clearProgress(slot);
      await store.clearIndexes(slot);
      await store.transition(slot, { type: "begin", ...want });
    });
  }
  const running = otherSlot(slot);
  const bytes_ = await phase(log, "write", () =>
    writeAll(req, store, { running, target: slot }, release, req.digest),
  ).catch((e: unknown) => {
    // Say what it means for the machine: nothing was staged, the next run resumes.
    if (e instanceof Error)
      e.message += `; slot ${slot} stays withdrawn (the next download resumes)`;
    throw e;
  });
  const bad = await phase(log, "verify", () => readBackArtifacts(release, device, req.direct));
  if (bad.length > 0) {
    // The medium does not hold what was written: start those artifacts over next time.
    const progress = await store.progress(slot, req.digest);
    for (const b of bad) delete progress.artifacts[b.name];
    await store.saveProgress(slot, progress);
    throw new SlotError(
      "LIKEN_SLOT_VERIFY_FAILED",
      `slot ${slot} (${device}): read-back of ${bad.map((b) => `${b.name} (${b.got})`).join(", ")} does not match release ${req.version}; the slot stays withdrawn`,
      { retryable: true, context: { slot, bad } },
    );
  }
  await phase(log, "stage", async () => {
    await store.writeRelease(slot, bytes);
    await store.transition(slot, { type: "staged", verifiedAt: new Date().toISOString() });
    await store.clearProgress(slot);
  });
  log?.(
    `bytes: ${bytes_.fetched} fetched, ${bytes_.reused} reused from local disks, ${bytes_.requests} range request(s)` +
      (bytes_.fromPeers !== undefined ? `, ${bytes_.fromPeers} from peers` : ""),
  );
  return { slot, version: req.version, digest: digestOf(bytes), outcome: "staged", bytes: bytes_ };
}
