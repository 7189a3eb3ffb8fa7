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
  type Release,
} from "../verify/release.js";
import { writeArtifact } from "./artifact.js";
import { otherSlot, runningSlot, type AgentSlotsConfig, type SlotName } from "./config.js";
import { SlotError } from "./errors.js";
import { planStage } from "./marker.js";
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
}

export interface DownloadResult {
  slot: SlotName;
  version: string;
  digest: string;
  outcome: "staged" | "already-staged";
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

async function writeAll(
  req: DownloadRequest,
  store: SlotStore,
  slot: SlotName,
  release: Release,
  releaseDigest: string,
): Promise<void> {
  const base = releaseBase(req.source, release.version);
  const progress: Progress = await store.progress(slot, releaseDigest);
  for (const a of release.artifacts) {
    const p = progress.artifacts[a.name];
    if (p?.done) continue;
    await writeArtifact({
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
        };
        await store.saveProgress(slot, progress);
      },
      ...(req.checkpointEvery ? { checkpointEvery: req.checkpointEvery } : {}),
      ...(req.attempts ? { attempts: req.attempts } : {}),
      ...(req.fetch ? { fetch: req.fetch } : {}),
      ...(req.direct !== undefined ? { direct: req.direct } : {}),
      ...(req.log ? { log: req.log } : {}),
    });
    progress.artifacts[a.name] = { offset: a.size, done: true };
    await store.saveProgress(slot, progress);
  }
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
      await store.transition(slot, { type: "begin", ...want });
    });
  }
  await phase(log, "write", () => writeAll(req, store, slot, release, req.digest)).catch(
    (e: unknown) => {
      // Say what it means for the machine: nothing was staged, the next run resumes.
      if (e instanceof Error)
        e.message += `; slot ${slot} stays withdrawn (the next download resumes)`;
      throw e;
    },
  );
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
  return { slot, version: req.version, digest: digestOf(bytes), outcome: "staged" };
}
