// The release document (<source>/<version>/release.yaml) and the first links of the trust
// chain: catalog digest -> these exact bytes -> each artifact's size, digest and chunks.
// See docs/releases.md for the format.
import { digestOf, DIGEST_RE, HEX_RE } from "./digest.js";
import { parseCappedYaml, Fields } from "./document.js";
import { INDEX_HEADER, maxIndexBytes, MIN_INDEX_CHUNK } from "./chunk-index.js";
import { maxTopBytes, PAGE_ENTRY, TOP_HEADER } from "./index-pages.js";
import { VerifyError } from "./errors.js";

export const API_VERSION = "liken.sh/v1alpha1";
/** 1 MiB: a release with 4 MiB chunks lists ~70 bytes per chunk, so this holds >50 GiB of
 * artifacts, and a hostile document is refused before the parser sees it. */
export const MAX_RELEASE_BYTES = 1024 * 1024;
export const MAX_ARTIFACTS = 64;
/** Chunk sizes are powers of two from 64 KiB to 64 MiB (a multiple of every sector size). */
export const MIN_CHUNK = 64 * 1024;
export const MAX_CHUNK = 64 * 1024 * 1024;
export const DEFAULT_CHUNK = 4 * 1024 * 1024;
/** Slot offsets are multiples of 4096 so O_DIRECT writes are aligned on 512e and 4Kn disks. */
export const SLOT_ALIGN = 4096;

export const VERSION_RE = /^[0-9A-Za-z][0-9A-Za-z._+-]{0,62}$/;
const NAME_RE = /^[a-z0-9][a-z0-9-]{0,62}$/;
// One or more plain segments; no "..", no scheme, no leading "/", no "%" (an encoded dot or
// slash must not sneak past this check), no "\", "?" or "#".
const PATH_RE = /^[A-Za-z0-9_][A-Za-z0-9._-]*(\/[A-Za-z0-9_][A-Za-z0-9._-]*)*$/;

export interface Chunks {
  size: number;
  /** One hex SHA-256 per chunk, in order; the last chunk may be shorter. */
  digests: string[];
}

/** The artifact's chunk index (./chunk-index.ts): an artifact of its own, trusted by digest. */
export interface IndexRef {
  path: string;
  size: number;
  digest: string;
}

export interface Artifact {
  name: string;
  /** Relative to the release directory <source>/<version>/. */
  path: string;
  size: number;
  digest: string;
  chunks?: Chunks;
  /** Chunk index for adaptive downloads; without one the artifact is fetched whole. */
  index?: IndexRef;
  /**
   * The chunks as zstd frames in index order, the index in pages under a top index
   * (./index-pages.ts): all three or none; without them chunks travel plain (releases built
   * before packs).
   */
  pack?: IndexRef;
  indexTop?: IndexRef;
  indexPages?: IndexRef;
  /** Byte offset of the artifact inside the slot. */
  offset: number;
}

export interface Release {
  apiVersion: typeof API_VERSION;
  kind: "Release";
  version: string;
  artifacts: Artifact[];
  /**
   * The oldest release a machine that ran this one may go back to (a data format it migrates,
   * a firmware it updates): a fleet-wide revert of this release never goes below it
   * (docs/revert.md). Absent: no floor.
   */
  revertFloor?: string;
}

export function isSafeVersion(v: string): boolean {
  return VERSION_RE.test(v) && !v.includes("..");
}

function parseChunks(f: Fields, size: number): Chunks {
  f.only(["size", "digests"]);
  const csize = f.int("size", MIN_CHUNK, MAX_CHUNK);
  if ((csize & (csize - 1)) !== 0) f.fail("size", "must be a power of two (for example 4194304)");
  const want = Math.max(1, Math.ceil(size / csize));
  const list = f.list("digests", want);
  if (list.length !== want) {
    f.fail(
      "digests",
      `has ${list.length} digests; an artifact of ${size} bytes in chunks of ${csize} has ${want}`,
    );
  }
  list.forEach((d, i) => {
    if (typeof d !== "string" || !HEX_RE.test(d))
      f.fail(`digests[${i}]`, "must be 64 lowercase hex digits");
  });
  return { size: csize, digests: list as string[] };
}

function parseIndexRef(f: Fields, size: number): IndexRef {
  f.only(["path", "size", "digest"]);
  const p = f.str("path", PATH_RE, "a relative path inside the release directory");
  // A bound before anything is fetched: an index of an artifact of `size` bytes cannot be
  // larger than one entry per smallest chunk (absurdly many chunks are refused here).
  const isize = f.int("size", INDEX_HEADER, maxIndexBytes(size));
  const digest = f.str("digest", DIGEST_RE, "sha256: and 64 lowercase hex digits");
  return { path: p, size: isize, digest };
}

function parseRef(f: Fields, min: number, max: number): IndexRef {
  f.only(["path", "size", "digest"]);
  const p = f.str("path", PATH_RE, "a relative path inside the release directory");
  const rsize = f.int("size", min, max);
  const digest = f.str("digest", DIGEST_RE, "sha256: and 64 lowercase hex digits");
  return { path: p, size: rsize, digest };
}

function parseArtifact(f: Fields): Artifact {
  f.only([
    "name",
    "path",
    "size",
    "digest",
    "chunks",
    "index",
    "offset",
    "pack",
    "indexTop",
    "indexPages",
  ]);
  const name = f.str("name", NAME_RE, "lowercase letters, digits and '-'");
  const p = f.str("path", PATH_RE, "a relative path inside the release directory");
  const size = f.int("size", 0);
  const digest = f.str("digest", DIGEST_RE, "sha256: and 64 lowercase hex digits");
  const offset = f.optional("offset") ? f.int("offset", 0) : 0;
  if (offset % SLOT_ALIGN !== 0) f.fail("offset", `must be a multiple of ${SLOT_ALIGN}`);
  const a: Artifact = { name, path: p, size, digest, offset };
  if (f.optional("chunks")) a.chunks = parseChunks(f.obj("chunks"), size);
  if (f.optional("index")) a.index = parseIndexRef(f.obj("index"), size);
  const packed = ["pack", "indexTop", "indexPages"].filter((k) => f.optional(k));
  if (packed.length > 0) {
    if (packed.length !== 3 || a.index === undefined) {
      f.fail(
        packed[0]!,
        "pack, indexTop and indexPages come together, with index (liken release build writes all four)",
      );
    }
    // Bounds before anything is fetched, as for the index: a frame is at most a chunk plus
    // zstd's overhead, a page entry 40 bytes a chunk.
    const chunks = Math.max(1, Math.ceil(size / MIN_INDEX_CHUNK));
    a.pack = parseRef(f.obj("pack"), 0, size + chunks * 64);
    a.indexTop = parseRef(f.obj("indexTop"), TOP_HEADER, maxTopBytes(size));
    a.indexPages = parseRef(f.obj("indexPages"), 0, PAGE_ENTRY * chunks);
  }
  return a;
}

/** Refuses a path outside the release directory even when the regex above let it pass. */
function checkUnsafePath(raw: unknown, i: number): void {
  if (typeof raw !== "object" || raw === null) return;
  const p = (raw as { path?: unknown }).path;
  if (typeof p !== "string") return;
  if (p.split("/").some((s) => s === "." || s === "..")) {
    throw new VerifyError(
      "LIKEN_VERIFY_PATH_UNSAFE",
      `release.yaml: artifacts[${i}].path "${p.slice(0, 80)}" leaves the release directory; an artifact must live under <source>/<version>/`,
      { context: { field: `artifacts[${i}].path`, path: p } },
    );
  }
  if (/^[a-z][a-z0-9+.-]*:/i.test(p) || p.startsWith("/") || p.includes("\\") || p.includes("%")) {
    throw new VerifyError(
      "LIKEN_VERIFY_PATH_UNSAFE",
      `release.yaml: artifacts[${i}].path "${p.slice(0, 80)}" is an absolute path or URL; an artifact must be a relative path under <source>/<version>/`,
      { context: { field: `artifacts[${i}].path`, path: p } },
    );
  }
}

function checkOverlaps(artifacts: Artifact[]): void {
  const sorted = [...artifacts].sort((a, b) => a.offset - b.offset);
  for (let i = 1; i < sorted.length; i++) {
    const prev = sorted[i - 1]!;
    const cur = sorted[i]!;
    if (prev.offset + prev.size > cur.offset) {
      throw new VerifyError(
        "LIKEN_VERIFY_DOCUMENT_INVALID",
        `release.yaml: artifacts ${prev.name} and ${cur.name} overlap in the slot (${prev.name} ends at ${prev.offset + prev.size}, ${cur.name} starts at ${cur.offset})`,
      );
    }
  }
}

/** Parses and validates release.yaml; the bytes must already have passed checkCatalogDigest. */
export function parseRelease(bytes: Uint8Array): Release {
  const f = Fields.root("release.yaml", parseCappedYaml(bytes, "release.yaml", MAX_RELEASE_BYTES));
  f.only(["apiVersion", "kind", "version", "artifacts", "revertFloor"]);
  if (f.str("apiVersion") !== API_VERSION) f.fail("apiVersion", `must be ${API_VERSION}`);
  if (f.str("kind") !== "Release") f.fail("kind", "must be Release");
  const version = f.str("version", VERSION_RE, "letters, digits, '.', '_', '+', '-'");
  if (!isSafeVersion(version)) f.fail("version", "must not contain '..'");
  const raw = f.list("artifacts", MAX_ARTIFACTS);
  if (raw.length === 0) f.fail("artifacts", "must name at least one artifact");
  raw.forEach(checkUnsafePath);
  const artifacts = raw.map((a, i) => parseArtifact(f.item("artifacts", i, a)));
  const names = new Set<string>();
  for (const a of artifacts) {
    if (names.has(a.name)) f.fail("artifacts", `names ${a.name} twice`);
    names.add(a.name);
  }
  // Boot files (docs/releases.md): an initrd is built for one kernel; without that kernel the
  // machine would boot it with another release's. Malformed for every backend.
  if (names.has("initrd") && !names.has("kernel")) {
    const i = artifacts.findIndex((a) => a.name === "initrd");
    f.fail(
      `artifacts[${i}].name`,
      "is initrd but no artifact is named kernel: a release's initrd boots only with its own " +
        "kernel; add it (`liken release build -a kernel=FILE`) or leave both out",
    );
  }
  checkOverlaps(artifacts);
  const floor = f.optional("revertFloor")
    ? f.str("revertFloor", VERSION_RE, "a liken version: letters, digits, '.', '_', '+', '-'")
    : undefined;
  return {
    apiVersion: API_VERSION,
    kind: "Release",
    version,
    artifacts,
    ...(floor === undefined ? {} : { revertFloor: floor }),
  };
}

/** The first link: the release document's bytes must hash to the catalog digest. */
export function checkCatalogDigest(
  bytes: Uint8Array,
  catalogDigest: string,
  version: string,
): void {
  const got = digestOf(bytes);
  if (got !== catalogDigest) {
    throw new VerifyError(
      "LIKEN_VERIFY_DIGEST_MISMATCH",
      `release.yaml of ${version} has digest ${got}, the catalog says ${catalogDigest}; nothing was written. Check the catalog entry (liken release catalog-entry) or the channel`,
      { context: { version, got, want: catalogDigest } },
    );
  }
}

/**
 * Verifies release.yaml against the catalog entry it was fetched for: digest first (nothing
 * untrusted is parsed deeper than the size cap), then the version it declares, so a
 * document of another release cannot be mixed in under this version's name.
 */
export function verifyRelease(
  bytes: Uint8Array,
  catalog: { version: string; digest: string },
): Release {
  checkCatalogDigest(bytes, catalog.digest, catalog.version);
  const r = parseRelease(bytes);
  if (r.version !== catalog.version) {
    throw new VerifyError(
      "LIKEN_VERIFY_VERSION_MISMATCH",
      `release.yaml declares version ${r.version} but was fetched as ${catalog.version}; the catalog entry names another release's document`,
      { context: { want: catalog.version, got: r.version } },
    );
  }
  return r;
}

/** The URL of the release directory: <source>/<version>/ (source may end in "/"). */
export function releaseBase(source: string, version: string): URL {
  if (!isSafeVersion(version)) {
    throw new VerifyError(
      "LIKEN_VERIFY_DOCUMENT_INVALID",
      `version "${version}" is not a valid liken version`,
    );
  }
  const base = new URL(source.endsWith("/") ? source : `${source}/`);
  return new URL(`${encodeURIComponent(version)}/`, base);
}

/** An artifact's URL; it must stay under the release directory, on the same origin. */
export function artifactUrl(base: URL, a: Pick<Artifact, "path" | "name">): URL {
  const u = new URL(a.path, base);
  if (u.origin !== base.origin || !u.pathname.startsWith(base.pathname) || u.search || u.hash) {
    throw new VerifyError(
      "LIKEN_VERIFY_PATH_UNSAFE",
      `artifact ${a.name}: ${a.path} resolves to ${u.href}, outside ${base.href}`,
    );
  }
  return u;
}
