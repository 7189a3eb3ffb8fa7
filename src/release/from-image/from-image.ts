// `liken release build --from-image <ref>`: an OCI image in, a release out. Reads and checks
// the layout (./oci.ts), applies its layers (./unpack.ts), finds its kernel and initrd
// (./boot.ts), makes the slot's root filesystem (./fs.ts), then publishes rootfs, kernel and
// initrd as `liken release build -a` does. Everything is made in a work directory beside the
// channel and the release is renamed into the channel last: a refused build leaves nothing
// in it. The same image and options give the same bytes, so the same release digest.
import { createHash } from "node:crypto";
import { copyFile, mkdir, mkdtemp, rm } from "node:fs/promises";
import path from "node:path";
import { buildRelease, ReleaseError, type ArtifactInput } from "../build.js";
import type { ReleaseSizes } from "../sizes.js";
import type { Release } from "../../verify/release.js";
import { SLOT_ALIGN } from "../../verify/release.js";
import { findBootArtifacts, linkGrubBootFiles, type BootArtifacts } from "./boot.js";
import { imageError } from "./errors.js";
import { makeFilesystemImage, type SlotFs } from "./fs.js";
import { readOciLayout, type OciImage } from "./oci.js";
import type { FileNode, Tree } from "./tree.js";
import { layersOf, unpackLayers } from "./unpack.js";

/** Labels an image may carry; flags override each. */
export const LABELS = {
  version: ["sh.liken.release.version", "org.opencontainers.image.version"],
  notes: ["sh.liken.release.notes", "org.opencontainers.image.description"],
  revertFloor: ["sh.liken.release.revert-floor"],
  kernelVersion: ["sh.liken.release.kernel-version"],
} as const;

export interface FromImageOptions {
  /** An OCI layout directory, `oci:<dir>[:<name>]` or `oci-archive:<file>[:<name>]`. */
  ref: string;
  /** The channel directory. */
  out: string;
  /** The slot's size: rootfs, kernel and initrd together must fit it. */
  slotSizeBytes: number;
  fs?: SlotFs;
  version?: string;
  notes?: string;
  revertFloor?: string;
  kernelVersion?: string;
  /**
   * Default: SOURCE_DATE_EPOCH from the environment, else the image config's `created`, else
   * the newest mtime in the image's layers (see epochOf).
   */
  sourceDateEpoch?: number;
  /**
   * The image to take from a multi-platform index, `os/architecture[/variant]` (linux/arm64);
   * default: this machine's. Given, the image's config must be for it (./oci.ts).
   */
  platform?: string;
  /** The root filesystem's UUID and hash seed; default ROOTFS_UUID. */
  uuid?: string;
  chunkSize?: number;
  index?: boolean;
  /** Where the work directory is made (default: beside the channel directory). */
  workDir?: string;
  warn?: (message: string) => void;
  log?: (message: string) => void;
}

export interface FromImageResult {
  digest: string;
  dir: string;
  release: Release;
  sizes: ReleaseSizes;
  version: string;
  boot: BootArtifacts;
  manifestDigest: string;
  sourceDateEpoch: number;
  uuid: string;
}

/** A UUID (version 4 layout) made from a name: the same name, the same UUID. */
export function uuidFrom(name: string): string {
  const h = createHash("sha256").update(name).digest("hex");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-8${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

/**
 * Every release's root filesystem has the same UUID by default: ext4 seeds the checksum of
 * every inode, directory block and bitmap with it, so a UUID per release would change all of
 * them and no metadata block would be reused (measured: every inode table block of the pair in
 * docs/releases.md). liken finds slots by partition label, never by filesystem UUID.
 */
export const ROOTFS_UUID = uuidFrom("liken-rootfs");

function label(labels: Record<string, string>, names: readonly string[]): string | undefined {
  for (const n of names) if (labels[n] !== undefined && labels[n] !== "") return labels[n];
  return undefined;
}

function epochFromEnv(): number | undefined {
  const v = process.env.SOURCE_DATE_EPOCH;
  if (v === undefined || v === "") return undefined;
  if (!/^\d+$/.test(v)) {
    throw new ReleaseError(
      "LIKEN_RELEASE_BAD_EPOCH",
      `SOURCE_DATE_EPOCH="${v}" is not a whole number of seconds`,
    );
  }
  return Number(v);
}

const align = (n: number): number => Math.ceil(n / SLOT_ALIGN) * SLOT_ALIGN;

interface Settings {
  version: string;
  notes: string | undefined;
  revertFloor: string | undefined;
  kernelVersion: string | undefined;
  /** Undefined when neither the options, the environment nor the image say: see epochOf. */
  epoch: number | undefined;
  uuid: string;
}

/** What the flags say, else the image's labels, else the defaults. */
function settingsOf(o: FromImageOptions, image: OciImage): Settings {
  const labels = image.labels;
  const version = o.version ?? label(labels, LABELS.version);
  if (version === undefined) {
    throw new ReleaseError(
      "LIKEN_RELEASE_BAD_VERSION",
      `${o.ref}: no --version and no ${LABELS.version.join(" or ")} label: give the release a version`,
    );
  }
  return {
    version,
    notes: o.notes ?? label(labels, LABELS.notes),
    revertFloor: o.revertFloor ?? label(labels, LABELS.revertFloor),
    kernelVersion: o.kernelVersion ?? label(labels, LABELS.kernelVersion),
    epoch: o.sourceDateEpoch ?? epochFromEnv() ?? image.created,
    uuid: o.uuid ?? ROOTFS_UUID,
  };
}

/** The root filesystem's size: the slot less the kernel and initrd placed after it. */
function rootfsBytes(slotSizeBytes: number, boot: FileNode[]): number {
  const bootBytes = boot.reduce((n, f) => n + align(f.size), 0);
  const fsBytes = Math.floor((slotSizeBytes - bootBytes) / SLOT_ALIGN) * SLOT_ALIGN;
  if (fsBytes <= 0) {
    throw imageError(
      "LIKEN_IMAGE_TOO_LARGE",
      `the kernel and initrd alone (${bootBytes} bytes) fill the slot of ${slotSizeBytes} bytes (--slot-size): give a larger --slot-size`,
      { sizeBytes: slotSizeBytes },
    );
  }
  return fsBytes;
}

/**
 * The time of the build: what the settings say, else (no SOURCE_DATE_EPOCH, and no `created`,
 * which the OCI image spec leaves optional) the newest mtime in the image's layers. That is a
 * time the image itself fixes, so every build of it gives the same bytes (the build's clock
 * would give another digest every time, silently), no file's time is clamped, and it is near
 * when the image was made (0, 1970, would be as fixed but would set every file's time to it).
 */
function epochOf(s: Settings, tree: Tree): number {
  return s.epoch ?? tree.newestMtime();
}

/** rootfs.img, vmlinuz and initrd.img in `work`: the release's artifacts, in slot order. */
async function makeArtifacts(
  o: FromImageOptions,
  image: OciImage,
  s: Settings,
  work: string,
): Promise<{ artifacts: ArtifactInput[]; boot: BootArtifacts; epoch: number }> {
  const tree = await unpackLayers(layersOf(image), {
    contentDir: path.join(work, "content"),
    sourceDateEpoch: s.epoch,
  });
  const epoch = epochOf(s, tree);
  const boot = findBootArtifacts(tree, s.kernelVersion);
  linkGrubBootFiles(tree, boot, epoch);
  const files: [string, string, FileNode][] = [["kernel", "vmlinuz", tree.file(boot.kernel)!]];
  if (boot.initrd !== undefined) files.push(["initrd", "initrd.img", tree.file(boot.initrd)!]);
  const sizeBytes = rootfsBytes(
    o.slotSizeBytes,
    files.map((f) => f[2]),
  );
  const rootfs = path.join(work, "rootfs.img");
  const fs = o.fs ?? "ext4";
  o.log?.(`from-image: ${fs} of ${sizeBytes} bytes, kernel ${boot.version}, time ${epoch}`);
  await makeFilesystemImage({
    tree,
    fs,
    out: rootfs,
    sizeBytes,
    sourceDateEpoch: epoch,
    uuid: s.uuid,
    workDir: work,
  });
  const artifacts: ArtifactInput[] = [{ name: "rootfs", file: rootfs }];
  for (const [name, file, node] of files) {
    await copyFile(node.content, path.join(work, file));
    artifacts.push({ name, file: path.join(work, file) });
  }
  return { artifacts, boot, epoch };
}

export async function buildReleaseFromImage(o: FromImageOptions): Promise<FromImageResult> {
  const parent = o.workDir ?? path.dirname(path.resolve(o.out));
  await mkdir(parent, { recursive: true });
  const work = await mkdtemp(path.join(parent, ".liken-from-image-"));
  let image: OciImage | undefined;
  try {
    image = await readOciLayout(o.ref, {
      workDir: work,
      ...(o.platform === undefined ? {} : { platform: o.platform }),
    });
    const s = settingsOf(o, image);
    o.log?.(
      `from-image: ${image.manifestDigest} (${image.os ?? "?"}/${image.architecture ?? "?"}), ${image.layers.length} layer(s), version ${s.version}`,
    );
    const { artifacts, boot, epoch } = await makeArtifacts(o, image, s, work);
    const r = await buildRelease({
      version: s.version,
      out: o.out,
      artifacts,
      ...(o.chunkSize === undefined ? {} : { chunkSize: o.chunkSize }),
      ...(s.revertFloor === undefined ? {} : { revertFloor: s.revertFloor }),
      ...(o.index === undefined ? {} : { index: o.index }),
      ...(s.notes === undefined ? {} : { notes: s.notes }),
      ...(o.warn === undefined ? {} : { warn: o.warn }),
    });
    return {
      ...r,
      version: s.version,
      boot,
      manifestDigest: image.manifestDigest,
      sourceDateEpoch: epoch,
      uuid: s.uuid,
    };
  } finally {
    await image?.close();
    await rm(work, { recursive: true, force: true });
  }
}
