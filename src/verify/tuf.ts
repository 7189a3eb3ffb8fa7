// The TUF client of a signed channel: tuf-js's Updater does every check of the metadata (root
// rotation one version at a time, signature thresholds, expiry, rollback of each role's
// version, snapshot and target lengths and hashes); this module feeds it the trusted state the
// caller persisted, pins the first root to a digest, fetches over liken's own HTTP (proxy
// settings, byte caps, same-origin redirects: fetch.ts), and turns each failure into a
// ChannelTrusted reason that names the role. Nothing else in liken parses channel metadata.
import { createHash } from "node:crypto";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { Metadata, MetadataKind } from "@tufjs/models";
import { Updater, type Fetcher } from "tuf-js";
// tuf-js does not re-export its error classes from its entry point (package has no exports map).
import { DownloadHTTPError } from "tuf-js/dist/error.js";
import { errorText } from "../errors.js";
import { VerifyError } from "./errors.js";
import { fetchDocument } from "./fetch.js";
import { parseRelease } from "./release.js";
import { releasesOf, type ChannelRelease } from "./tuf-target.js";
import { TRUST_FAULTS } from "../api/types.js";

/** The metadata a client trusts, as the JSON text of each file (what the caller persists). */
export interface TrustedFiles {
  root: string;
  timestamp?: string;
  snapshot?: string;
  targets?: string;
}

export type MetadataRole = "root" | "timestamp" | "snapshot" | "targets" | "target";

export type TrustFault = (typeof TRUST_FAULTS)[number];

export interface TufFault {
  reason: TrustFault;
  role: MetadataRole;
  message: string;
}

/** The maximal sizes of the metadata files (tuf-js's own defaults are 512 KiB to 5 MiB). */
const MAX_ROOT_BYTES = 512 * 1024;
/** 15 s per file: the channel poll's own timeout (operator/channel.ts). */
const FETCH_TIMEOUT_MS = 15_000;

/** tuf-js's Fetcher over liken's HTTP; remembers which role it fetched last, for the fault. */
class ChannelFetcher implements Fetcher {
  role: MetadataRole = "root";

  private note(url: string): void {
    const base = path.posix.basename(new URL(url).pathname);
    const m = /(root|timestamp|snapshot|targets)\.json$/.exec(base);
    this.role = m === null ? "target" : (m[1] as MetadataRole);
  }

  async downloadBytes(url: string, maxLength: number): Promise<Buffer> {
    this.note(url);
    try {
      return await fetchDocument(new URL(url), maxLength, {
        idleTimeoutMs: FETCH_TIMEOUT_MS,
        signal: AbortSignal.timeout(FETCH_TIMEOUT_MS),
      });
    } catch (e) {
      throw asTufError(e);
    }
  }

  async downloadFile<T>(
    url: string,
    maxLength: number,
    handler: (file: string) => Promise<T>,
  ): Promise<T> {
    const bytes = await this.downloadBytes(url, maxLength);
    const dir = await mkdtemp(path.join(tmpdir(), "liken-tuf-dl-"));
    try {
      const file = path.join(dir, "download");
      await writeFile(file, bytes);
      return await handler(file);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }
}

/**
 * tuf-js ends its walk of new roots on a 403 or 404 only when the error is its own
 * DownloadHTTPError; liken's HTTP error is mapped to it.
 */
function asTufError(e: unknown): unknown {
  if (e instanceof VerifyError && e.code === "LIKEN_VERIFY_HTTP_STATUS") {
    return new DownloadHTTPError(e.message, Number(e.context.status));
  }
  return e;
}

/**
 * The clock seam: tuf-js judges expiry against the time it read when the Updater was made
 * (TrustedMetadataStore.referenceTime, TUF client workflow 5.1). liken sets it to its own
 * clock minus the accepted expiry, so "accept metadata expired up to N seconds" is exactly
 * "judge expiry N seconds earlier" (TUF metadata has no not-before time to break).
 * test/unit/verify-tuf.test.ts fails if a tuf-js upgrade moves the field.
 */
export function setReferenceTime(u: Updater, at: Date): void {
  const store = (u as unknown as { trustedSet?: { referenceTime?: Date } }).trustedSet;
  if (store === undefined || !(store.referenceTime instanceof Date)) {
    throw new Error("tuf-js changed: its Updater has no trustedSet.referenceTime to set");
  }
  store.referenceTime = at;
}

export interface TufReadInput {
  /** <source>/tuf/ */
  metadataUrl: URL;
  /** What was trusted before; undefined: start from the pinned root. */
  trusted: TrustedFiles | undefined;
  /** sha256:<hex> of the channel's 1.root.json (spec.releases.trust.rootDigest). */
  rootDigest: string;
  channel: string;
  now: Date;
  acceptExpiredSeconds: number;
  /** Which release to verify to its bytes (downloaded and checked against its target). */
  pick: (releases: ChannelRelease[]) => ChannelRelease | undefined;
}

export type TufRead =
  | {
      ok: true;
      files: TrustedFiles;
      releases: ChannelRelease[];
      /** The earliest expiry of the trusted roles: when this view stops being fresh. */
      expires: { role: MetadataRole; at: Date };
      /** The picked release, verified against its target (length, sha256, version). */
      verified: ChannelRelease | undefined;
    }
  | { ok: false; fault: TufFault };

const sha256 = (b: Uint8Array): string => `sha256:${createHash("sha256").update(b).digest("hex")}`;

/** Runs the TUF client once. Never throws: every failure is a fault naming its role. */
export async function readSignedChannel(input: TufReadInput): Promise<TufRead> {
  const dir = await mkdtemp(path.join(tmpdir(), "liken-tuf-"));
  const fetcher = new ChannelFetcher();
  try {
    const metaDir = path.join(dir, "metadata");
    const targetDir = path.join(dir, "targets");
    await mkdir(metaDir);
    await mkdir(targetDir);
    const start = await startingFiles(input, fetcher);
    if ("fault" in start) return { ok: false, fault: start.fault };
    for (const [role, text] of Object.entries(start.files)) {
      if (text !== undefined) await writeFile(path.join(metaDir, `${role}.json`), text);
    }
    const updater = new Updater({
      metadataDir: metaDir,
      metadataBaseUrl: input.metadataUrl.href,
      targetDir,
      targetBaseUrl: new URL("targets/", input.metadataUrl).href,
      fetcher,
    });
    setReferenceTime(updater, new Date(input.now.getTime() - input.acceptExpiredSeconds * 1000));
    await updater.refresh();
    const files = await readTrusted(metaDir);
    const targets = targetsOf(files.targets);
    const releases = releasesOf(targets, input.channel);
    const changed = changedDigest(input.trusted?.targets, targets);
    if (changed !== undefined) return { ok: false, fault: changed };
    const picked = input.pick(releases);
    if (picked !== undefined) {
      fetcher.role = "target";
      const info = await updater.getTargetInfo(picked.path);
      if (info === undefined) throw new Error(`target ${picked.path} vanished`);
      const file = await updater.downloadTarget(info, path.join(targetDir, "release.yaml"));
      const bytes = await readFile(file);
      const doc = parseRelease(bytes);
      if (doc.version !== picked.version || sha256(bytes) !== picked.digest) {
        return {
          ok: false,
          fault: {
            reason: "MetadataInvalid",
            role: "target",
            message: `target ${picked.path} declares version ${doc.version}; a release is named by its own version`,
          },
        };
      }
    }
    return { ok: true, files, releases, expires: earliestExpiry(files), verified: picked };
  } catch (e) {
    return { ok: false, fault: classify(e, fetcher.role) };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

async function startingFiles(
  input: TufReadInput,
  fetcher: ChannelFetcher,
): Promise<{ files: TrustedFiles } | { fault: TufFault }> {
  if (input.trusted !== undefined) return { files: input.trusted };
  const url = new URL("1.root.json", input.metadataUrl);
  const bytes = await fetcher.downloadBytes(url.href, MAX_ROOT_BYTES);
  const got = sha256(bytes);
  if (got !== input.rootDigest) {
    return {
      fault: {
        reason: "RootPinMismatch",
        role: "root",
        message: `${url.href} has digest ${got}, not the pinned ${input.rootDigest}: this is not the channel the Cluster pins (or it was re-created); check spec.releases.source and pin the channel's first root (liken release channel init prints its digest)`,
      },
    };
  }
  return { files: { root: bytes.toString("utf8") } };
}

async function readTrusted(dir: string): Promise<TrustedFiles> {
  const read = (n: string): Promise<string | undefined> =>
    readFile(path.join(dir, `${n}.json`), "utf8").catch(() => undefined);
  const root = await read("root");
  if (root === undefined) throw new Error("tuf-js kept no root.json");
  const out: TrustedFiles = { root };
  for (const n of ["timestamp", "snapshot", "targets"] as const) {
    const t = await read(n);
    if (t !== undefined) out[n] = t;
  }
  return out;
}

type TargetMap = Parameters<typeof releasesOf>[0];

function targetsOf(text: string | undefined): TargetMap {
  if (text === undefined) return {};
  const md = Metadata.fromJSON(MetadataKind.Targets, JSON.parse(text) as never);
  const out: TargetMap = {};
  for (const [p, t] of Object.entries(md.signed.targets)) {
    out[p] = { length: t.length, hashes: t.hashes, custom: t.custom };
  }
  return out;
}

/** A path trusted before with another sha256 than now: a version names one build, forever. */
export function changedDigest(before: string | undefined, now: TargetMap): TufFault | undefined {
  const old = targetsOf(before);
  for (const [p, t] of Object.entries(old)) {
    const n = now[p];
    if (n !== undefined && n.hashes.sha256 !== t.hashes.sha256) {
      return {
        reason: "DigestChanged",
        role: "targets",
        message: `targets names ${p} with sha256 ${n.hashes.sha256 ?? "?"}, but it named it with ${t.hashes.sha256 ?? "?"} before: a version names one build; the channel's publisher must publish the rebuild under a new version`,
      };
    }
  }
  return undefined;
}

function earliestExpiry(files: TrustedFiles): { role: MetadataRole; at: Date } {
  let best: { role: MetadataRole; at: Date } | undefined;
  for (const role of ["root", "timestamp", "snapshot", "targets"] as const) {
    const text = files[role];
    if (text === undefined) continue;
    const at = new Date((JSON.parse(text) as { signed: { expires: string } }).signed.expires);
    if (best === undefined || at < best.at) best = { role, at };
  }
  return best ?? { role: "root", at: new Date(0) };
}

/**
 * How a failure of tuf-js or of the fetch reads as a fault, first match wins: by the library's
 * error class, then by its words (tuf-js wraps snapshot and targets failures in a RuntimeError
 * whose message carries the inner one). A rule for root only comes before the general one.
 */
const RULES: readonly {
  reason: TrustFault;
  classes: readonly string[];
  words: RegExp;
  role?: MetadataRole;
}[] = [
  { reason: "MetadataExpired", classes: ["ExpiredMetadataError"], words: /expired/i },
  {
    reason: "RootRotationInvalid",
    classes: ["BadVersionError"],
    words: /Expected version/,
    role: "root",
  },
  {
    reason: "MetadataRollback",
    classes: ["BadVersionError"],
    words: /is less than current version|Expected version/i,
  },
  {
    reason: "SignatureThreshold",
    classes: ["UnsignedMetadataError"],
    words: /was signed by \d+\/\d+ keys/,
  },
  {
    reason: "LengthOrHashMismatch",
    classes: ["LengthOrHashMismatchError", "DownloadLengthMismatchError"],
    words: /Expected (length|hash)|LIKEN_VERIFY_DOCUMENT_TOO_LARGE|more than/i,
  },
  {
    reason: "ChannelUnreachable",
    classes: ["DownloadHTTPError", "VerifyError"],
    words: /HTTP \d{3}|ECONN|fetch failed/i,
  },
];

/** What went wrong, by the failing role and the library's error. */
export function classify(e: unknown, role: MetadataRole): TufFault {
  const name = (e as Error | undefined)?.constructor?.name ?? "";
  const text = errorText(e);
  const rule = RULES.find(
    (r) =>
      (r.role === undefined || r.role === role) && (r.classes.includes(name) || r.words.test(text)),
  );
  // tuf-js finds an expired timestamp while it loads the snapshot ("timestamp.json is expired"):
  // the role its words name is the one at fault, not the file being fetched.
  const named = /\b(root|timestamp|snapshot|targets)\.json is expired/.exec(text)?.[1];
  const at = (named as MetadataRole | undefined) ?? role;
  return { reason: rule?.reason ?? "MetadataInvalid", role: at, message: `${at}: ${text}` };
}
