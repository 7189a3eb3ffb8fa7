// `liken release build`: artifacts in, a release directory and an updated channel out.
// Writes <out>/<version>/{release.yaml, artifacts} and <out>/channel.yaml (newest last).
import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import {
  access,
  chmod,
  constants,
  mkdir,
  mkdtemp,
  readdir,
  readFile,
  rename,
  rm,
  stat,
  writeFile,
} from "node:fs/promises";
import path from "node:path";
import { stringify } from "yaml";
import { LikenError } from "../errors.js";
import { parseChannel, type Channel } from "../verify/channel.js";
import { ChunkIndex, IndexWriter } from "../verify/chunk-index.js";
import { digestOf } from "../verify/digest.js";
import { compressedAdvice, EntropySampler, KERNEL_HEAD } from "./entropy.js";
import { writePack } from "./pack.js";
import { releaseSizes, type ReleaseSizes } from "./sizes.js";
import { SparseWriter } from "./sparse.js";
import {
  API_VERSION,
  DEFAULT_CHUNK,
  isSafeVersion,
  parseRelease,
  SLOT_ALIGN,
  type Artifact,
  type Release,
} from "../verify/release.js";

export class ReleaseError extends LikenError {}

export interface ArtifactInput {
  name: string;
  /** The file to publish. */
  file: string;
  /** Offset in the slot; default: right after the previous artifact, aligned to 4096. */
  offset?: number;
}

export interface BuildOptions {
  version: string;
  artifacts: ArtifactInput[];
  /** The channel directory (what `liken channel serve` or a CDN serves). */
  out: string;
  chunkSize?: number;
  /** release.yaml revertFloor: the oldest release a revert of this one may go back to. */
  revertFloor?: string;
  /** Write a chunk index beside each artifact (default true): adaptive downloads need it. */
  index?: boolean;
  /**
   * Write a zstd pack and a paged index beside each index (default true): machines then fetch
   * chunks compressed and only the index pages that changed (docs/releases.md).
   */
  pack?: boolean;
  /** Told what a person building the release should know (an artifact that will not reuse). */
  warn?: (message: string) => void;
  /** Written as notes.txt beside release.yaml: for people, not part of the digest. */
  notes?: string;
}

/** The index's file beside its artifact. */
export function indexFileOf(artifactPath: string): string {
  return `${artifactPath}.lkidx`;
}

/** The pack, top index and pages files beside their artifact. */
export function packFilesOf(artifactPath: string): { pack: string; top: string; pages: string } {
  return {
    pack: `${artifactPath}.lkpack`,
    top: `${artifactPath}.lktop`,
    pages: `${artifactPath}.lkpages`,
  };
}

/** The digest of a file, streamed. */
async function fileDigest(file: string): Promise<string> {
  const h = createHash("sha256");
  for await (const b of createReadStream(file, { highWaterMark: 1024 * 1024 }))
    h.update(b as Buffer);
  return `sha256:${h.digest("hex")}`;
}

export interface FileFacts {
  size: number;
  digest: string;
  chunks: string[];
  /** The chunk index (src/verify/chunk-index.ts) of the file. */
  index: Buffer;
  /** True when the file looks compressed as a whole (./entropy.ts). */
  looksCompressed: boolean;
  /** The file's first bytes (up to KERNEL_HEAD): what a kernel image is told by. */
  head: Buffer;
}

/**
 * Whole digest, per-chunk digests, chunk index and entropy sample of a file in one pass; given
 * `copyTo`, the file is copied there sparse (./sparse.ts) in the same pass.
 */
export async function hashFile(
  file: string,
  chunkSize: number,
  copyTo?: string,
): Promise<FileFacts> {
  const copy = copyTo === undefined ? undefined : await SparseWriter.create(copyTo);
  try {
    const facts = await hashPieces(file, chunkSize, copy);
    await copy?.finish();
    return facts;
  } catch (e) {
    await copy?.abort();
    throw e;
  }
}

async function hashPieces(
  file: string,
  chunkSize: number,
  copy: SparseWriter | undefined,
): Promise<FileFacts> {
  const index = new IndexWriter();
  const entropy = new EntropySampler();
  const whole = createHash("sha256");
  const chunks: string[] = [];
  let chunk = createHash("sha256");
  let inChunk = 0;
  let size = 0;
  let head = Buffer.alloc(0);
  for await (const piece of createReadStream(file, { highWaterMark: 1024 * 1024 })) {
    const b = piece as Buffer;
    await copy?.write(b);
    if (head.length < KERNEL_HEAD)
      head = Buffer.concat([head, b.subarray(0, KERNEL_HEAD - head.length)]);
    whole.update(b);
    index.update(b);
    entropy.update(b);
    size += b.length;
    for (let off = 0; off < b.length;) {
      const n = Math.min(chunkSize - inChunk, b.length - off);
      chunk.update(b.subarray(off, off + n));
      inChunk += n;
      off += n;
      if (inChunk === chunkSize) {
        chunks.push(chunk.digest("hex"));
        chunk = createHash("sha256");
        inChunk = 0;
      }
    }
  }
  if (inChunk > 0 || chunks.length === 0) chunks.push(chunk.digest("hex"));
  return {
    size,
    digest: `sha256:${whole.digest("hex")}`,
    chunks,
    index: index.finish(),
    looksCompressed: entropy.looksCompressed,
    head,
  };
}

async function readChannel(file: string): Promise<Channel> {
  try {
    return parseChannel(await readFile(file));
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") {
      return { apiVersion: API_VERSION, kind: "Channel", versions: [] };
    }
    throw e;
  }
}

/** Writes a file so a reader sees the old or the new bytes, never a mix. */
async function writeAtomic(file: string, data: string | Uint8Array): Promise<void> {
  const tmp = `${file}.tmp-${process.pid}`;
  await writeFile(tmp, data);
  await rename(tmp, file);
}

export function releaseYaml(r: Release): string {
  return stringify(r, { lineWidth: 0 });
}

/** Copies the artifacts, their indexes and release.yaml into `stage`; returns release.yaml. */
async function writeReleaseDir(
  o: BuildOptions,
  stage: string,
  chunkSize: number,
): Promise<{ bytes: Buffer; release: Release }> {
  const artifacts: Artifact[] = [];
  let next = 0;
  for (const a of o.artifacts) {
    const file = path.basename(a.file);
    const h = await hashFile(a.file, chunkSize, path.join(stage, file));
    const offset = a.offset ?? next;
    const art: Artifact = { name: a.name, path: file, size: h.size, digest: h.digest, offset };
    if (h.size > chunkSize) art.chunks = { size: chunkSize, digests: h.chunks };
    if (o.index !== false) {
      const ipath = indexFileOf(file);
      await writeFile(path.join(stage, ipath), h.index);
      art.index = { path: ipath, size: h.index.length, digest: digestOf(h.index) };
      if (o.pack !== false) {
        const names = packFilesOf(file);
        const packFile = path.join(stage, names.pack);
        const idx = ChunkIndex.parse(h.index, h.size, `index of ${a.name}`);
        const p = await writePack(path.join(stage, file), idx, packFile);
        await writeFile(path.join(stage, names.top), p.top);
        await writeFile(path.join(stage, names.pages), p.pages);
        art.pack = { path: names.pack, size: p.packSize, digest: await fileDigest(packFile) };
        art.indexTop = { path: names.top, size: p.top.length, digest: digestOf(p.top) };
        art.indexPages = { path: names.pages, size: p.pages.length, digest: digestOf(p.pages) };
      }
    }
    const advice = h.looksCompressed ? compressedAdvice(a.name, a.file, h.size, h.head) : undefined;
    if (advice !== undefined) o.warn?.(advice);
    artifacts.push(art);
    next = Math.ceil((offset + h.size) / SLOT_ALIGN) * SLOT_ALIGN;
  }
  const release: Release = {
    apiVersion: API_VERSION,
    kind: "Release",
    version: o.version,
    artifacts,
    ...(o.revertFloor === undefined ? {} : { revertFloor: o.revertFloor }),
  };
  const bytes = Buffer.from(releaseYaml(release));
  parseRelease(bytes); // what liken writes, liken must read: validate before publishing
  await writeFile(path.join(stage, "release.yaml"), bytes);
  if (o.notes !== undefined) await writeFile(path.join(stage, "notes.txt"), o.notes);
  return { bytes, release };
}

/**
 * A release is public (what a channel's web server hands every machine; no secret is in it),
 * and the server often runs as another user: the directory 0755 and its files 0644, whatever
 * the builder's umask, and not mkdtemp's 0700 (a version directory nobody else could read).
 */
async function makeReadable(stage: string): Promise<void> {
  await chmod(stage, 0o755);
  for (const n of await readdir(stage)) await chmod(path.join(stage, n), 0o644);
}

/**
 * Renames the staged release directory to `dir`; into an existing `dir` (one a person made,
 * without a release.yaml), file by file with release.yaml last.
 */
async function moveInto(stage: string, dir: string): Promise<void> {
  try {
    await rename(stage, dir);
    return;
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code !== "ENOTEMPTY" && code !== "EEXIST") throw e;
  }
  const names = (await readdir(stage)).filter((n) => n !== "release.yaml");
  for (const n of [...names, "release.yaml"]) await rename(path.join(stage, n), path.join(dir, n));
  await rm(stage, { recursive: true, force: true });
}

export async function buildRelease(
  o: BuildOptions,
): Promise<{ digest: string; dir: string; release: Release; sizes: ReleaseSizes }> {
  if (!isSafeVersion(o.version)) {
    throw new ReleaseError(
      "LIKEN_RELEASE_BAD_VERSION",
      `version "${o.version}" is not valid: use letters, digits, '.', '_', '+', '-'`,
    );
  }
  const chunkSize = o.chunkSize ?? DEFAULT_CHUNK;
  const dir = path.join(o.out, o.version);
  try {
    await stat(path.join(dir, "release.yaml"));
    throw new ReleaseError(
      "LIKEN_RELEASE_EXISTS",
      `${dir}/release.yaml exists: a published release never changes; choose a new version`,
    );
  } catch (e) {
    if (e instanceof ReleaseError) throw e;
  }
  await checkArtifacts(o.artifacts);
  // The release is made in a hidden directory of the channel and renamed into place last, so a
  // refused or interrupted build leaves no <version>/ behind (and a reader never sees half).
  await mkdir(o.out, { recursive: true });
  const stage = await mkdtemp(path.join(o.out, `.${o.version}.partial-`));
  let made: { bytes: Buffer; release: Release };
  try {
    made = await writeReleaseDir(o, stage, chunkSize);
    await makeReadable(stage);
    await moveInto(stage, dir);
  } catch (e) {
    await rm(stage, { recursive: true, force: true });
    throw e;
  }
  const { bytes, release } = made;
  const digest = digestOf(bytes);
  const channelFile = path.join(o.out, "channel.yaml");
  const channel = await readChannel(channelFile);
  channel.versions = channel.versions.filter((v) => v.version !== o.version);
  channel.versions.push({ version: o.version, digest });
  await writeAtomic(channelFile, stringify(channel, { lineWidth: 0 }));
  return { digest, dir, release, sizes: await releaseSizes(dir, release, bytes.length) };
}

/** Every artifact is a readable regular file, checked before anything is written. */
async function checkArtifacts(artifacts: ArtifactInput[]): Promise<void> {
  const problems: string[] = [];
  for (const a of artifacts) {
    try {
      if (!(await stat(a.file)).isFile()) problems.push(`${a.name}=${a.file} is not a file`);
      else await access(a.file, constants.R_OK);
    } catch (e) {
      const code = (e as { code?: string }).code;
      problems.push(
        `${a.name}=${a.file} ${code === "ENOENT" ? "does not exist" : `cannot be read (${code})`}`,
      );
    }
  }
  if (problems.length > 0) {
    throw new ReleaseError(
      "LIKEN_RELEASE_ARTIFACT_UNREADABLE",
      `${problems.join("; ")}: give each artifact as NAME=FILE with an existing file; nothing was written`,
      { context: { problems } },
    );
  }
}

/** The YAML a person pastes into spec.releases.catalog; the version quoted, as on the page,
 * so a version such as 1.10 stays a string. */
export function catalogEntry(version: string, digest: string): string {
  return `- version: ${JSON.stringify(version)}\n  digest: ${digest}\n`;
}
