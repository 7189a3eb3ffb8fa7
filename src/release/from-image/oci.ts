// Reads an OCI image layout (a directory, or an `oci-archive:` tar of one) as buildah, skopeo
// and umoci write it: index.json, then one image manifest and its config, each checked against
// its descriptor's media type, size and digest before a byte of it is used. Layers are checked
// the same way here, before unpack.ts reads them. From a multi-platform index, the image of
// the platform asked for, else this machine's (./platform.ts).
import { createHash } from "node:crypto";
import { createReadStream, createWriteStream } from "node:fs";
import { mkdir, mkdtemp, readFile, rm, stat } from "node:fs/promises";
import path from "node:path";
import { pipeline } from "node:stream/promises";
import { extract } from "tar-stream";
import { z } from "zod";
import { imageError } from "./errors.js";
import {
  checkConfigPlatform,
  hostPlatform,
  isPlatform,
  parsePlatform,
  platformName,
  type Platform,
} from "./platform.js";

export const MEDIA = {
  index: "application/vnd.oci.image.index.v1+json",
  manifest: "application/vnd.oci.image.manifest.v1+json",
  config: "application/vnd.oci.image.config.v1+json",
  layer: "application/vnd.oci.image.layer.v1.tar",
  layerGzip: "application/vnd.oci.image.layer.v1.tar+gzip",
  layerZstd: "application/vnd.oci.image.layer.v1.tar+zstd",
} as const;

const LAYER_TYPES: readonly string[] = [MEDIA.layer, MEDIA.layerGzip, MEDIA.layerZstd];

const digestRe = /^(sha256:[0-9a-f]{64}|sha512:[0-9a-f]{128})$/;

const descriptorSchema = z.looseObject({
  mediaType: z.string(),
  digest: z.string(),
  size: z.number().int().nonnegative(),
  annotations: z.record(z.string(), z.string()).optional(),
  platform: z
    .looseObject({ architecture: z.string(), os: z.string(), variant: z.string().optional() })
    .optional(),
});
export type Descriptor = z.infer<typeof descriptorSchema>;

const indexSchema = z.looseObject({
  schemaVersion: z.literal(2),
  mediaType: z.string().optional(),
  manifests: z.array(descriptorSchema),
});

const manifestSchema = z.looseObject({
  schemaVersion: z.literal(2),
  mediaType: z.string().optional(),
  config: descriptorSchema,
  layers: z.array(descriptorSchema),
});

const configSchema = z.looseObject({
  created: z.string().optional(),
  architecture: z.string().optional(),
  os: z.string().optional(),
  variant: z.string().optional(),
  config: z.looseObject({ Labels: z.record(z.string(), z.string()).nullish() }).optional(),
  rootfs: z.looseObject({ type: z.literal("layers"), diff_ids: z.array(z.string()) }),
});

export interface OciImage {
  /** The layout directory (an archive's is a temporary copy, removed by close()). */
  dir: string;
  manifestDigest: string;
  /** The layers, lowest first, each checked against its descriptor. */
  layers: Descriptor[];
  /** The uncompressed digest of each layer (config rootfs.diff_ids), in the same order. */
  diffIds: string[];
  /** The image config's labels (org.opencontainers.image.version ...). */
  labels: Record<string, string>;
  architecture: string | undefined;
  os: string | undefined;
  /** The config's `created` time, seconds (the default SOURCE_DATE_EPOCH), if it has one. */
  created: number | undefined;
  blobPath(d: Descriptor): string;
  /** Removes what reading an archive unpacked; a layout directory is left as it was. */
  close(): Promise<void>;
}

export interface ParsedRef {
  kind: "dir" | "archive";
  path: string;
  /** org.opencontainers.image.ref.name to choose in index.json. */
  tag?: string;
}

/**
 * `oci-archive:<file>[:<tag>]`, `oci:<dir>[:<tag>]`, or a plain layout directory (skopeo's and
 * buildah's spelling of a transport).
 */
export function parseImageRef(ref: string): ParsedRef {
  const m = /^(oci-archive|oci):(.+)$/.exec(ref);
  if (!m) {
    if (ref === "") throw imageError("LIKEN_IMAGE_REF", "an empty image reference", { ref });
    return { kind: "dir", path: ref };
  }
  const [, transport, rest] = m;
  const colon = rest!.lastIndexOf(":");
  const p = colon > 0 ? rest!.slice(0, colon) : rest!;
  const tag = colon > 0 ? rest!.slice(colon + 1) : undefined;
  return {
    kind: transport === "oci-archive" ? "archive" : "dir",
    path: p,
    ...(tag === undefined || tag === "" ? {} : { tag }),
  };
}

function parseJson<T>(schema: z.ZodType<T>, bytes: Buffer, what: string): T {
  let raw: unknown;
  try {
    raw = JSON.parse(bytes.toString("utf8"));
  } catch (e) {
    throw imageError("LIKEN_IMAGE_LAYOUT", `${what} is not JSON: ${(e as Error).message}`, {
      what,
    });
  }
  const r = schema.safeParse(raw);
  if (!r.success) {
    const i = r.error.issues[0]!;
    throw imageError(
      "LIKEN_IMAGE_LAYOUT",
      `${what}: ${i.path.join(".") || "(document)"}: ${i.message}`,
      { what },
    );
  }
  return r.data;
}

function blobFile(dir: string, d: Descriptor, what: string): string {
  if (!digestRe.test(d.digest)) {
    throw imageError(
      "LIKEN_IMAGE_DIGEST",
      `${what}: digest "${d.digest}" is not sha256:<64 hex> or sha512:<128 hex>`,
      { digest: d.digest },
    );
  }
  const [alg, hex] = d.digest.split(":");
  return path.join(dir, "blobs", alg!, hex!);
}

/** Checks a blob's size and digest against its descriptor; refuses it naming the blob. */
export async function verifyBlob(dir: string, d: Descriptor, what: string): Promise<string> {
  const file = blobFile(dir, d, what);
  let size: number;
  try {
    size = (await stat(file)).size;
  } catch {
    throw imageError(
      "LIKEN_IMAGE_DIGEST",
      `${what} ${d.digest}: blob missing from the layout (${path.relative(dir, file)}): copy the image again`,
      { blob: d.digest },
    );
  }
  if (size !== d.size) {
    throw imageError(
      "LIKEN_IMAGE_DIGEST",
      `${what} ${d.digest}: the blob has ${size} bytes, its descriptor says ${d.size}: the layout is damaged or was edited; copy the image again`,
      { blob: d.digest, size, declared: d.size },
    );
  }
  const [alg] = d.digest.split(":");
  const h = createHash(alg!);
  for await (const b of createReadStream(file)) h.update(b as Buffer);
  const got = `${alg}:${h.digest("hex")}`;
  if (got !== d.digest) {
    throw imageError(
      "LIKEN_IMAGE_DIGEST",
      `${what} ${d.digest}: the blob's bytes hash to ${got}: the layout is damaged or was edited; copy the image again`,
      { blob: d.digest, got },
    );
  }
  return file;
}

function requireType(d: Descriptor, allowed: readonly string[], what: string): void {
  if (!allowed.includes(d.mediaType)) {
    throw imageError(
      "LIKEN_IMAGE_MEDIA_TYPE",
      `${what} ${d.digest}: media type "${d.mediaType}" is not one liken reads (${allowed.join(", ")}); ` +
        `write the image as an OCI layout (buildah push oci-archive:..., skopeo copy ... oci-archive:...)`,
      { blob: d.digest, mediaType: d.mediaType },
    );
  }
}

/**
 * The one image manifest the reference names: by tag, else the only one, else the one for
 * `platform`. `chosenFor` is set to the platform when that chose it (the config is checked).
 */
function chooseManifest(
  manifests: Descriptor[],
  tag: string | undefined,
  where: string,
  choice: { platform: Platform; chosenFor?: Platform },
): Descriptor {
  const named = (d: Descriptor): string =>
    d.annotations?.["org.opencontainers.image.ref.name"] ?? "";
  let pick = manifests;
  if (tag !== undefined) pick = manifests.filter((d) => named(d) === tag);
  else if (pick.length > 1) {
    pick = manifests.filter(
      (d) => d.platform !== undefined && isPlatform(d.platform, choice.platform),
    );
    choice.chosenFor = choice.platform;
  }
  if (pick.length !== 1) {
    const list = manifests
      .map(
        (d) =>
          `${named(d) || "(no name)"} ${d.platform ? platformName(d.platform) : ""} ${d.digest}`,
      )
      .join("; ");
    throw imageError(
      "LIKEN_IMAGE_MANIFEST_CHOICE",
      `${where}/index.json: ${pick.length === 0 ? "no" : "more than one"} image manifest ${tag === undefined ? `for ${platformName(choice.platform)}` : `named "${tag}"`} among [${list}]: name one with <ref>:<name>, or ask for one of their platforms`,
      { tag, platform: platformName(choice.platform) },
    );
  }
  return pick[0]!;
}

/** Unpacks an oci-archive (a tar of a layout) into `into`: plain files and directories only. */
async function unpackArchive(file: string, into: string): Promise<void> {
  const ex = extract();
  const done = pipeline(createReadStream(file), ex);
  for await (const entry of ex) {
    const h = entry.header;
    const name = path.posix
      .normalize(h.name)
      .replace(/^\.\/?/, "")
      .replace(/\/$/, "");
    if (name === "" || name === ".") {
      entry.resume();
      continue;
    }
    if (path.posix.isAbsolute(h.name) || name.split("/").includes("..")) {
      throw imageError(
        "LIKEN_IMAGE_LAYOUT",
        `${file}: entry "${h.name}" is outside the layout: not an OCI archive liken reads`,
        { entry: h.name },
      );
    }
    const to = path.join(into, name);
    if (h.type === "directory") {
      await mkdir(to, { recursive: true });
      entry.resume();
    } else if (h.type === "file") {
      await mkdir(path.dirname(to), { recursive: true });
      await pipeline(entry, createWriteStream(to));
    } else {
      throw imageError(
        "LIKEN_IMAGE_LAYOUT",
        `${file}: entry "${h.name}" is a ${h.type}: an OCI archive holds files and directories only`,
        { entry: h.name },
      );
    }
  }
  await done;
}

function createdSeconds(created: string | undefined): number | undefined {
  if (created === undefined) return undefined;
  const ms = Date.parse(created);
  return Number.isNaN(ms) ? undefined : Math.max(0, Math.floor(ms / 1000));
}

export interface ReadOptions {
  /** Where an archive is unpacked (a temporary directory under it); default: beside the archive. */
  workDir?: string;
  /**
   * `os/architecture[/variant]`: the image to take from a multi-platform index (default: this
   * machine's). Given, the image's config must be for it, even when the layout has one image.
   */
  platform?: string;
}

async function checkLayoutFile(dir: string, where: string): Promise<void> {
  let layoutBytes: Buffer;
  try {
    layoutBytes = await readFile(path.join(dir, "oci-layout"));
  } catch {
    throw imageError(
      "LIKEN_IMAGE_REF",
      `${where}: no oci-layout file: not an OCI image layout (write one with skopeo copy ... oci:DIR or buildah push ... oci-archive:FILE)`,
      { ref: where },
    );
  }
  const layout = parseJson(
    z.looseObject({ imageLayoutVersion: z.string() }),
    layoutBytes,
    `${where}/oci-layout`,
  );
  if (!/^1\.\d+\.\d+$/.test(layout.imageLayoutVersion)) {
    throw imageError(
      "LIKEN_IMAGE_LAYOUT",
      `${where}/oci-layout: imageLayoutVersion ${layout.imageLayoutVersion} is not 1.x`,
      { ref: where },
    );
  }
}

/** index.json's image manifest for the reference, through a multi-platform index if any. */
async function resolveManifest(
  dir: string,
  r: ParsedRef,
  choice: { platform: Platform; chosenFor?: Platform },
): Promise<Descriptor> {
  let index = parseJson(
    indexSchema,
    await readFile(path.join(dir, "index.json")),
    `${r.path}/index.json`,
  );
  if (index.mediaType !== undefined && index.mediaType !== MEDIA.index) {
    throw imageError(
      "LIKEN_IMAGE_MEDIA_TYPE",
      `${r.path}/index.json: media type "${index.mediaType}" is not ${MEDIA.index}`,
      { mediaType: index.mediaType },
    );
  }
  let chosen = chooseManifest(index.manifests, r.tag, r.path, choice);
  for (let depth = 0; chosen.mediaType === MEDIA.index; depth++) {
    if (depth === 4) {
      throw imageError("LIKEN_IMAGE_LAYOUT", `${r.path}: image indexes nested too deep`);
    }
    const file = await verifyBlob(dir, chosen, "image index");
    index = parseJson(indexSchema, await readFile(file), `image index ${chosen.digest}`);
    chosen = chooseManifest(index.manifests, undefined, r.path, choice);
  }
  requireType(chosen, [MEDIA.manifest], "image manifest");
  return chosen;
}

/** The manifest, its config and its layers, each checked against its descriptor. */
async function readManifest(
  dir: string,
  chosen: Descriptor,
): Promise<{ manifest: z.infer<typeof manifestSchema>; config: z.infer<typeof configSchema> }> {
  const manifest = parseJson(
    manifestSchema,
    await readFile(await verifyBlob(dir, chosen, "image manifest")),
    `image manifest ${chosen.digest}`,
  );
  if (manifest.mediaType !== undefined && manifest.mediaType !== MEDIA.manifest) {
    throw imageError(
      "LIKEN_IMAGE_MEDIA_TYPE",
      `image manifest ${chosen.digest}: mediaType "${manifest.mediaType}" is not ${MEDIA.manifest}`,
      { blob: chosen.digest },
    );
  }
  requireType(manifest.config, [MEDIA.config], "image config");
  const config = parseJson(
    configSchema,
    await readFile(await verifyBlob(dir, manifest.config, "image config")),
    `image config ${manifest.config.digest}`,
  );
  if (config.rootfs.diff_ids.length !== manifest.layers.length) {
    throw imageError(
      "LIKEN_IMAGE_LAYOUT",
      `image config ${manifest.config.digest}: ${config.rootfs.diff_ids.length} diff_ids for ${manifest.layers.length} layers`,
      { blob: manifest.config.digest },
    );
  }
  for (const [i, l] of manifest.layers.entries()) {
    requireType(l, LAYER_TYPES, `layer ${i}`);
    await verifyBlob(dir, l, `layer ${i}`);
  }
  return { manifest, config };
}

/**
 * Reads and checks the image `ref` names: its index, manifest, config and every layer blob
 * (media type, size and digest against the descriptor).
 */
export async function readOciLayout(ref: string, o: ReadOptions = {}): Promise<OciImage> {
  const r = parseImageRef(ref);
  const wanted = o.platform === undefined ? undefined : parsePlatform(o.platform);
  // Asked for, the platform is checked whatever chose the image; else only when it chose.
  const choice: { platform: Platform; chosenFor?: Platform } = {
    platform: wanted ?? hostPlatform(),
    ...(wanted === undefined ? {} : { chosenFor: wanted }),
  };
  let dir = r.path;
  let temp: string | undefined;
  if (r.kind === "archive") {
    try {
      await stat(r.path);
    } catch {
      throw imageError("LIKEN_IMAGE_REF", `${r.path}: no such OCI archive`, { ref });
    }
    temp = await mkdtemp(path.join(o.workDir ?? path.dirname(path.resolve(r.path)), ".liken-oci-"));
    dir = temp;
  }
  const close = async (): Promise<void> => {
    if (temp !== undefined) await rm(temp, { recursive: true, force: true });
  };
  try {
    if (temp !== undefined) await unpackArchive(r.path, temp);
    await checkLayoutFile(dir, r.path);
    const chosen = await resolveManifest(dir, r, choice);
    const { manifest, config } = await readManifest(dir, chosen);
    if (choice.chosenFor !== undefined) {
      checkConfigPlatform(config, choice.chosenFor, manifest.config.digest);
    }
    return {
      dir,
      manifestDigest: chosen.digest,
      layers: manifest.layers,
      diffIds: config.rootfs.diff_ids,
      labels: config.config?.Labels ?? {},
      architecture: config.architecture,
      os: config.os,
      created: createdSeconds(config.created),
      blobPath: (d) => blobFile(dir, d, "blob"),
      close,
    };
  } catch (e) {
    await close();
    throw e;
  }
}
