// The signing side of a signed channel (TUF): `liken release sign ...`. A channel directory
// (what `liken channel serve` or a CDN serves) gains tuf/ with the four top-level roles:
//   tuf/<N>.root.json, tuf/root.json   every root version (clients walk them one by one)
//   tuf/targets.json                   the releases, each a target: <channel>/<version>/release.yaml
//   tuf/snapshot.json, timestamp.json  freshness: which targets version is current, until when
//   tuf/targets/<channel>/<version>/release.yaml   byte for byte the release's release.yaml
// A target's sha256 is the release's catalog digest, so the artifact chain is unchanged; what
// the signatures add is who vouches for that first digest. The private keys live in a separate
// directory (never published), one PEM per key, named <role>-<keyid prefix>.pem.
//
// Metadata is built and signed with @tufjs/models (canonical JSON and signatures are the
// library's); ed25519 keys come from node:crypto.
import {
  createHash,
  createPrivateKey,
  generateKeyPairSync,
  sign,
  type KeyObject,
} from "node:crypto";
import { copyFile, mkdir, readdir, readFile, rename, writeFile } from "node:fs/promises";
import path from "node:path";
import {
  Key,
  MetaFile,
  Metadata,
  MetadataKind,
  Root,
  Signature,
  Snapshot,
  TargetFile,
  Targets,
  Timestamp,
} from "@tufjs/models";
import { LikenError } from "../errors.js";
import { parseRelease, isSafeVersion } from "../verify/release.js";
import type { SignedEvidence } from "../verify/evidence.js";
import {
  CHANNEL_NAME_RE,
  LIKEN_TARGET_FIELD,
  targetPathOf,
  type TargetCustom,
} from "../verify/tuf-target.js";

export type TufRoleName = "root" | "targets" | "snapshot" | "timestamp";
export const TUF_ROLES: readonly TufRoleName[] = ["root", "targets", "snapshot", "timestamp"];

export class ChannelSignError extends LikenError {}

const DAY = 24 * 3600;
/**
 * How long each role's signature holds unless told otherwise. Root a year (it is signed
 * offline, rarely); targets 90 days (a release every few weeks re-signs it); snapshot a week
 * and timestamp a day: the freshness roles are re-signed by `liken release sign refresh`,
 * from a cron job, so a frozen mirror is noticed within a day (TUF spec, section 6.2; the
 * same shape as Bottlerocket's and Sigstore's repositories).
 */
export const DEFAULT_EXPIRY_SECONDS: Readonly<Record<TufRoleName, number>> = {
  root: 365 * DAY,
  targets: 90 * DAY,
  snapshot: 7 * DAY,
  timestamp: 1 * DAY,
};

export interface ChannelDirs {
  /** The channel directory (served); metadata goes to <repo>/tuf. */
  repo: string;
  /** Where the private keys are kept (never served). */
  keys: string;
}

export interface SignOptions extends ChannelDirs {
  now?: Date;
  expires?: Partial<Record<TufRoleName, number>>;
  /**
   * One directory per root key, each on its own medium, kept offline (docs/releases.md, "The
   * key ceremony"). Unset: the root keys live in `keys` with the others.
   */
  rootKeyDirs?: string[];
  /** Encrypts the root keys written (PKCS#8, AES-256-CBC) and decrypts those read. */
  passphrase?: string;
  /** Told what a person should know, such as root keys sharing a directory. */
  warn?: (message: string) => void;
}

export interface InitOptions extends SignOptions {
  /** How many keys each role has, and how many must sign (default 1 and 1). */
  roles?: Partial<Record<TufRoleName, { keys: number; threshold: number }>>;
}

const SPEC_VERSION = "1.0.31";

export const tufDir = (repo: string): string => path.join(repo, "tuf");

// ------------------------------------------------------------------------------------------
// Keys

export interface SigningKey {
  key: Key;
  private: KeyObject;
}

/** A TUF key record of an ed25519 public key, with its keyid (sha256 of the record's canonical JSON). */
export function tufKeyOf(publicRaw: Buffer): Key {
  const keyVal = { public: publicRaw.toString("hex") };
  // The record has only ASCII strings and keys sorted here, so JSON.stringify is its canonical JSON.
  const canonical = JSON.stringify({ keytype: "ed25519", keyval: keyVal, scheme: "ed25519" });
  const keyID = createHash("sha256").update(canonical).digest("hex");
  return new Key({ keyID, keyType: "ed25519", scheme: "ed25519", keyVal });
}

function publicRawOf(k: KeyObject): Buffer {
  const jwk = k.export({ format: "jwk" });
  return Buffer.from(jwk.x ?? "", "base64url");
}

export async function newKey(
  keysDir: string,
  role: TufRoleName,
  passphrase?: string,
): Promise<SigningKey> {
  const { privateKey, publicKey } = generateKeyPairSync("ed25519");
  const key = tufKeyOf(publicRawOf(publicKey));
  await mkdir(keysDir, { recursive: true, mode: 0o700 });
  const pem = privateKey.export({
    format: "pem",
    type: "pkcs8",
    ...(passphrase === undefined ? {} : { cipher: "aes-256-cbc", passphrase }),
  });
  await writeFile(path.join(keysDir, `${role}-${key.keyID.slice(0, 16)}.pem`), pem, {
    mode: 0o600,
  });
  return { key, private: privateKey };
}

/** Every private key in the keys directory, by keyid. */
export async function loadKeys(
  keysDir: string,
  passphrase?: string,
): Promise<Map<string, SigningKey>> {
  const out = new Map<string, SigningKey>();
  const names = await readdir(keysDir).catch((e: unknown) => {
    throw new ChannelSignError(
      "LIKEN_CHANNEL_KEYS_MISSING",
      `cannot read the keys directory ${keysDir} (${String(e)}); pass --keys with the directory \`liken release sign init\` wrote`,
      { cause: e },
    );
  });
  for (const n of names.filter((x) => x.endsWith(".pem"))) {
    const pem = await readFile(path.join(keysDir, n));
    const encrypted = pem.includes("ENCRYPTED PRIVATE KEY");
    // An encrypted key without a passphrase is left out: a command that needs it says which
    // role lacks signatures (LIKEN_CHANNEL_THRESHOLD_NOT_MET), one that does not goes on.
    if (encrypted && passphrase === undefined) continue;
    let priv: KeyObject;
    try {
      priv = createPrivateKey(encrypted ? { key: pem, passphrase: passphrase! } : pem);
    } catch (cause) {
      throw new ChannelSignError(
        "LIKEN_CHANNEL_KEY_UNREADABLE",
        `${path.join(keysDir, n)} cannot be read${encrypted ? " with the passphrase given (wrong passphrase?)" : ""}: ${(cause as Error).message}`,
        { cause },
      );
    }
    const key = tufKeyOf(publicRawOf(priv));
    out.set(key.keyID, { key, private: priv });
  }
  return out;
}

/** The keys of `keys` and of every root key directory, by keyid. */
export async function loadAllKeys(o: SignOptions): Promise<Map<string, SigningKey>> {
  const all = await loadKeys(o.keys, o.passphrase);
  for (const dir of o.rootKeyDirs ?? []) {
    for (const [id, k] of await loadKeys(dir, o.passphrase)) all.set(id, k);
  }
  return all;
}

/**
 * What a person should hear about where the root keys go: root keys are meant to live apart
 * and offline, so two in one directory, or one beside the online keys, is worth a warning.
 */
export function rootKeyPlacementWarnings(
  rootKeys: number,
  rootKeyDirs: readonly string[] | undefined,
  keysDir: string,
): string[] {
  const dirs = Array.from({ length: rootKeys }, (_, i) =>
    path.resolve(rootKeyDirs?.[i] ?? keysDir),
  );
  const out: string[] = [];
  const seen = new Map<string, number[]>();
  dirs.forEach((d, i) => seen.set(d, [...(seen.get(d) ?? []), i + 1]));
  for (const [dir, which] of seen) {
    if (which.length > 1) {
      out.push(
        `root keys ${which.join(", ")} share ${dir}: root keys are meant to live apart and offline; give each its own --root-key DIR (docs/releases.md, "The key ceremony")`,
      );
    }
    if (dir === path.resolve(keysDir) && rootKeyDirs !== undefined) {
      out.push(
        `root key(s) ${which.join(", ")} are in the online keys directory ${dir}: keep root keys offline, apart from the keys a timer signs with`,
      );
    }
  }
  return out;
}

/** Signs `md` with each of `keys` (replacing earlier signatures). */
export function signWith(
  md: Metadata<Root | Targets | Snapshot | Timestamp>,
  keys: SigningKey[],
): void {
  md.signatures = {};
  for (const k of keys) {
    md.sign(
      (data) =>
        new Signature({ keyID: k.key.keyID, sig: sign(null, data, k.private).toString("hex") }),
      true,
    );
  }
}

// ------------------------------------------------------------------------------------------
// The repository as files

export interface ChannelRepo {
  root: Metadata<Root>;
  targets: Metadata<Targets>;
  snapshot: Metadata<Snapshot>;
  timestamp: Metadata<Timestamp>;
}

async function readJson(file: string): Promise<Record<string, unknown>> {
  try {
    return JSON.parse(await readFile(file, "utf8")) as Record<string, unknown>;
  } catch (e) {
    throw new ChannelSignError(
      "LIKEN_CHANNEL_NOT_INITIALIZED",
      `cannot read ${file} (${String(e)}); create the channel first with \`liken release sign init\``,
      { cause: e },
    );
  }
}

export async function readRepo(repo: string): Promise<ChannelRepo> {
  const d = tufDir(repo);
  /* eslint-disable @typescript-eslint/no-explicit-any */
  return {
    root: Metadata.fromJSON(MetadataKind.Root, (await readJson(path.join(d, "root.json"))) as any),
    targets: Metadata.fromJSON(
      MetadataKind.Targets,
      (await readJson(path.join(d, "targets.json"))) as any,
    ),
    snapshot: Metadata.fromJSON(
      MetadataKind.Snapshot,
      (await readJson(path.join(d, "snapshot.json"))) as any,
    ),
    timestamp: Metadata.fromJSON(
      MetadataKind.Timestamp,
      (await readJson(path.join(d, "timestamp.json"))) as any,
    ),
  };
  /* eslint-enable @typescript-eslint/no-explicit-any */
}

export const metadataBytes = (md: Metadata<Root | Targets | Snapshot | Timestamp>): Buffer =>
  Buffer.from(`${JSON.stringify(md.toJSON(), null, 1)}\n`);

/** Written to a temporary name and renamed: a client never reads half a file. */
async function writeAtomic(file: string, bytes: Buffer): Promise<void> {
  await mkdir(path.dirname(file), { recursive: true });
  const tmp = `${file}.tmp-${process.pid}`;
  await writeFile(tmp, bytes);
  await rename(tmp, file);
}

/**
 * Publishes in the order a client reads in reverse (targets, snapshot, timestamp last), so a
 * client that reads between two writes sees the old timestamp, which names files still there.
 */
async function writeRepo(repo: string, r: ChannelRepo, rootChanged: boolean): Promise<void> {
  const d = tufDir(repo);
  if (rootChanged) {
    const bytes = metadataBytes(r.root);
    await writeAtomic(path.join(d, `${r.root.signed.version}.root.json`), bytes);
    await writeAtomic(path.join(d, "root.json"), bytes);
  }
  await writeAtomic(path.join(d, "targets.json"), metadataBytes(r.targets));
  await writeAtomic(path.join(d, "snapshot.json"), metadataBytes(r.snapshot));
  await writeAtomic(path.join(d, "timestamp.json"), metadataBytes(r.timestamp));
}

function expiry(o: SignOptions, role: TufRoleName): string {
  const now = o.now ?? new Date();
  const secs = o.expires?.[role] ?? DEFAULT_EXPIRY_SECONDS[role];
  return new Date(Math.floor(now.getTime() / 1000) * 1000 + secs * 1000)
    .toISOString()
    .replace(/\.\d{3}Z$/, "Z");
}

/** The signing keys of `role` in the repo's root that are in the keys directory; throws below the threshold. */
function keysFor(root: Root, role: TufRoleName, keys: Map<string, SigningKey>): SigningKey[] {
  const r = root.roles[role];
  if (r === undefined)
    throw new ChannelSignError("LIKEN_CHANNEL_ROLE_MISSING", `root names no role ${role}`);
  const have = r.keyIDs.map((id) => keys.get(id)).filter((k): k is SigningKey => k !== undefined);
  if (have.length < r.threshold) {
    throw new ChannelSignError(
      "LIKEN_CHANNEL_THRESHOLD_NOT_MET",
      `role ${role} needs ${r.threshold} signature(s), and the keys directory holds ${have.length} of its keys (${r.keyIDs.map((k) => k.slice(0, 16)).join(", ")}); bring the missing key files (${role}-<keyid>.pem) to the keys directory, or name their directories with --root-key (and --passphrase-env for encrypted ones)`,
    );
  }
  return have;
}

/** Re-signs targets (version+1), then snapshot and timestamp naming it. */
function resignChain(
  r: ChannelRepo,
  keys: Map<string, SigningKey>,
  o: SignOptions,
  bumpTargets: boolean,
  targetsSigners?: SigningKey[],
): ChannelRepo {
  const root = r.root.signed;
  let targets = r.targets;
  if (bumpTargets) {
    targets = new Metadata(
      new Targets({
        version: r.targets.signed.version + 1,
        specVersion: SPEC_VERSION,
        expires: expiry(o, "targets"),
        targets: r.targets.signed.targets,
      }),
    );
    signWith(targets, targetsSigners ?? keysFor(root, "targets", keys));
  }
  const targetsBytes = metadataBytes(targets);
  const snapshot = new Metadata(
    new Snapshot({
      version: r.snapshot.signed.version + 1,
      specVersion: SPEC_VERSION,
      expires: expiry(o, "snapshot"),
      meta: {
        "targets.json": new MetaFile({
          version: targets.signed.version,
          length: targetsBytes.length,
          hashes: { sha256: createHash("sha256").update(targetsBytes).digest("hex") },
        }),
      },
    }),
  );
  signWith(snapshot, keysFor(root, "snapshot", keys));
  const snapBytes = metadataBytes(snapshot);
  const timestamp = new Metadata(
    new Timestamp({
      version: r.timestamp.signed.version + 1,
      specVersion: SPEC_VERSION,
      expires: expiry(o, "timestamp"),
      snapshotMeta: new MetaFile({
        version: snapshot.signed.version,
        length: snapBytes.length,
        hashes: { sha256: createHash("sha256").update(snapBytes).digest("hex") },
      }),
    }),
  );
  signWith(timestamp, keysFor(root, "timestamp", keys));
  return { root: r.root, targets, snapshot, timestamp };
}

// ------------------------------------------------------------------------------------------
// Commands

export interface InitResult {
  /** sha256:<hex> of tuf/1.root.json: what a Cluster pins in spec.releases.trust.rootDigest. */
  rootDigest: string;
  rootFile: string;
}

/** One --root-key directory per root key, and a warning for root keys that share one. */
function checkRootKeyDirs(o: InitOptions): void {
  const rootKeys = o.roles?.root?.keys ?? 1;
  if (o.rootKeyDirs !== undefined && o.rootKeyDirs.length !== rootKeys) {
    throw new ChannelSignError(
      "LIKEN_CHANNEL_ROOT_KEY_DIRS",
      `${o.rootKeyDirs.length} --root-key director(ies) for ${rootKeys} root key(s): give one --root-key DIR per root key (--threshold root=N/${rootKeys})`,
    );
  }
  for (const w of rootKeyPlacementWarnings(rootKeys, o.rootKeyDirs, o.keys)) o.warn?.(w);
}

/** The i-th key of a role, where it is told: a root key in its own directory, encrypted when asked. */
function newKeyFor(o: SignOptions, role: TufRoleName, i: number): Promise<SigningKey> {
  return role === "root"
    ? newKey(o.rootKeyDirs?.[i] ?? o.keys, role, o.passphrase)
    : newKey(o.keys, role);
}

export async function initChannel(o: InitOptions): Promise<InitResult> {
  const d = tufDir(o.repo);
  const exists = await readFile(path.join(d, "root.json")).then(
    () => true,
    () => false,
  );
  if (exists) {
    throw new ChannelSignError(
      "LIKEN_CHANNEL_EXISTS",
      `${d}/root.json exists: this channel is initialized; rotate keys with \`liken release sign rotate\` instead of starting over (clients that pinned its root would refuse a new one)`,
    );
  }
  checkRootKeyDirs(o);
  const keys = new Map<string, SigningKey>();
  const roles: Record<string, { keyids: string[]; threshold: number }> = {};
  for (const role of TUF_ROLES) {
    const want = o.roles?.[role] ?? { keys: 1, threshold: 1 };
    if (!(Number.isInteger(want.threshold) && want.threshold >= 1 && want.threshold <= want.keys)) {
      throw new ChannelSignError(
        "LIKEN_CHANNEL_BAD_THRESHOLD",
        `role ${role}: threshold ${want.threshold} with ${want.keys} key(s); the threshold must be between 1 and the number of keys`,
      );
    }
    const ids: string[] = [];
    for (let i = 0; i < want.keys; i++) {
      const k = await newKeyFor(o, role, i);
      keys.set(k.key.keyID, k);
      ids.push(k.key.keyID);
    }
    roles[role] = { keyids: ids, threshold: want.threshold };
  }
  const root = rootOf(
    1,
    expiry(o, "root"),
    [...keys.values()].map((k) => k.key),
    roles,
  );
  const rootMd = new Metadata(root);
  signWith(rootMd, keysFor(root, "root", keys));
  const empty: ChannelRepo = {
    root: rootMd,
    targets: new Metadata(
      new Targets({ version: 0, specVersion: SPEC_VERSION, expires: expiry(o, "targets") }),
    ),
    snapshot: new Metadata(
      new Snapshot({ version: 0, specVersion: SPEC_VERSION, expires: expiry(o, "snapshot") }),
    ),
    timestamp: new Metadata(
      new Timestamp({ version: 0, specVersion: SPEC_VERSION, expires: expiry(o, "timestamp") }),
    ),
  };
  await writeRepo(o.repo, resignChain(empty, keys, o, true), true);
  const rootFile = path.join(d, "1.root.json");
  const digest = createHash("sha256")
    .update(await readFile(rootFile))
    .digest("hex");
  return { rootDigest: `sha256:${digest}`, rootFile };
}

export interface AddOptions extends SignOptions {
  channel: string;
  version: string;
  /** How long after it is added the release's waves take to open for every follower. */
  waveSeconds?: number;
}

function checkChannelName(channel: string): void {
  if (!CHANNEL_NAME_RE.test(channel)) {
    throw new ChannelSignError(
      "LIKEN_CHANNEL_BAD_NAME",
      `channel name ${JSON.stringify(channel)}: use lowercase letters, digits and '-' (for example stable, beta)`,
    );
  }
}

/** Adds <repo>/<version>/release.yaml as a target of `channel` and re-signs. */
export async function addRelease(o: AddOptions): Promise<{ path: string; digest: string }> {
  checkChannelName(o.channel);
  if (!isSafeVersion(o.version)) {
    throw new ChannelSignError(
      "LIKEN_CHANNEL_BAD_VERSION",
      `version ${JSON.stringify(o.version)} is not a release version`,
    );
  }
  const src = path.join(o.repo, o.version, "release.yaml");
  const bytes = await readFile(src).catch((e: unknown) => {
    throw new ChannelSignError(
      "LIKEN_CHANNEL_RELEASE_MISSING",
      `cannot read ${src} (${String(e)}); build the release first with \`liken release build --out ${o.repo} --version ${o.version}\``,
      { cause: e },
    );
  });
  const doc = parseRelease(bytes);
  if (doc.version !== o.version) {
    throw new ChannelSignError(
      "LIKEN_CHANNEL_VERSION_MISMATCH",
      `${src} declares version ${doc.version}, not ${o.version}`,
    );
  }
  const r = await readRepo(o.repo);
  const tpath = targetPathOf(o.channel, o.version);
  const sha = createHash("sha256").update(bytes).digest("hex");
  const old = r.targets.signed.targets[tpath];
  if (old !== undefined) {
    if (old.hashes.sha256 === sha) return { path: tpath, digest: `sha256:${sha}` };
    throw new ChannelSignError(
      "LIKEN_CHANNEL_DIGEST_CHANGED",
      `${o.channel} already names ${o.version} with digest sha256:${old.hashes.sha256 ?? "?"}; a version names one build: publish the rebuilt release under a new version`,
    );
  }
  const custom: TargetCustom = {
    version: o.version,
    addedAt: (o.now ?? new Date()).toISOString(),
    ...(o.waveSeconds === undefined ? {} : { waveSeconds: o.waveSeconds }),
  };
  r.targets.signed.targets[tpath] = new TargetFile({
    path: tpath,
    length: bytes.length,
    hashes: { sha256: sha },
    unrecognizedFields: { custom: { [LIKEN_TARGET_FIELD]: { ...custom } } },
  });
  const dest = path.join(tufDir(o.repo), "targets", tpath);
  await mkdir(path.dirname(dest), { recursive: true });
  await copyFile(src, dest);
  const keys = await loadAllKeys(o);
  await writeRepo(o.repo, resignChain(r, keys, o, true), false);
  return { path: tpath, digest: `sha256:${sha}` };
}

export interface PromoteOptions extends SignOptions {
  /** The channel the release is in (the ring before), and the one it goes to. */
  from: string;
  to: string;
  version: string;
  /** custom.liken.evidence: what the ring showed (src/verify/evidence.ts), signed with the target. */
  evidence: SignedEvidence;
}

/**
 * Signs the release `from` names as `version` into channel `to`, the same bytes and digest,
 * with the evidence in the target's custom metadata (`liken promote`). Promoting again (more
 * evidence) replaces the evidence and keeps when it was first added (the follow delay's start).
 */
export async function promoteRelease(o: PromoteOptions): Promise<{ path: string; digest: string }> {
  checkChannelName(o.from);
  checkChannelName(o.to);
  const r = await readRepo(o.repo);
  const src = targetPathOf(o.from, o.version);
  const s = r.targets.signed.targets[src];
  if (s?.hashes.sha256 === undefined) {
    throw new ChannelSignError(
      "LIKEN_CHANNEL_NO_SUCH_RELEASE",
      `channel ${o.from} names no release ${o.version}; nothing to promote`,
    );
  }
  const tpath = targetPathOf(o.to, o.version);
  const old = r.targets.signed.targets[tpath];
  if (old !== undefined && old.hashes.sha256 !== s.hashes.sha256) {
    throw new ChannelSignError(
      "LIKEN_CHANNEL_DIGEST_CHANGED",
      `${o.to} already names ${o.version} with digest sha256:${old.hashes.sha256 ?? "?"}, and ${o.from} names it sha256:${s.hashes.sha256}; a version names one build`,
    );
  }
  const was = (old?.custom[LIKEN_TARGET_FIELD] ?? {}) as Partial<TargetCustom>;
  const custom: TargetCustom = {
    version: o.version,
    addedAt: was.addedAt ?? (o.now ?? new Date()).toISOString(),
    evidence: o.evidence,
  };
  r.targets.signed.targets[tpath] = new TargetFile({
    path: tpath,
    length: s.length,
    hashes: s.hashes,
    unrecognizedFields: { custom: { [LIKEN_TARGET_FIELD]: { ...custom } } },
  });
  const dest = path.join(tufDir(o.repo), "targets", tpath);
  await mkdir(path.dirname(dest), { recursive: true });
  await copyFile(path.join(tufDir(o.repo), "targets", src), dest);
  await writeRepo(o.repo, resignChain(r, await loadAllKeys(o), o, true), false);
  return { path: tpath, digest: `sha256:${s.hashes.sha256}` };
}

export interface RecallOptions extends SignOptions {
  channel: string;
  version: string;
  reason: string;
}

/**
 * A signed recall: the target stays (so an older targets version, where it was not recalled,
 * is a rollback every client refuses) and carries recalled {at, reason}.
 */
export async function recallRelease(o: RecallOptions): Promise<void> {
  checkChannelName(o.channel);
  const r = await readRepo(o.repo);
  const tpath = targetPathOf(o.channel, o.version);
  const t = r.targets.signed.targets[tpath];
  if (t === undefined) {
    throw new ChannelSignError(
      "LIKEN_CHANNEL_NO_SUCH_RELEASE",
      `channel ${o.channel} names no release ${o.version}; nothing to recall`,
    );
  }
  const field = (t.custom[LIKEN_TARGET_FIELD] ?? {}) as Record<string, unknown>;
  const recalled = { at: (o.now ?? new Date()).toISOString(), reason: o.reason };
  r.targets.signed.targets[tpath] = new TargetFile({
    path: tpath,
    length: t.length,
    hashes: t.hashes,
    unrecognizedFields: { custom: { [LIKEN_TARGET_FIELD]: { ...field, recalled } } },
  });
  await writeRepo(o.repo, resignChain(r, await loadAllKeys(o), o, true), false);
}

/**
 * Re-signs snapshot and timestamp with fresh expiries (a cron job's work); with `targets`, the
 * targets role too (its expiry is near, or it must be signed again by the role's keys).
 */
export async function refreshChannel(o: SignOptions & { targets?: boolean }): Promise<void> {
  const r = await readRepo(o.repo);
  await writeRepo(o.repo, resignChain(r, await loadAllKeys(o), o, o.targets ?? false), false);
}

/**
 * Replaces every key of `role` with a new one: root version+1, signed by the old root keys
 * (so clients accept the rotation) and by the new ones (so it is self-signed), then the
 * chain re-signed. The old private keys are moved to <keys>/revoked/.
 */
export async function rotateKey(
  o: SignOptions & { role: TufRoleName },
): Promise<{ rootVersion: number }> {
  const r = await readRepo(o.repo);
  const keys = await loadAllKeys(o);
  const oldRootSigners = keysFor(r.root.signed, "root", keys);
  const before = r.root.signed.roles[o.role];
  if (before === undefined)
    throw new ChannelSignError("LIKEN_CHANNEL_ROLE_MISSING", `root names no role ${o.role}`);
  const fresh: SigningKey[] = [];
  for (let i = 0; i < before.keyIDs.length; i++) {
    const k = await newKeyFor(o, o.role, i);
    fresh.push(k);
    keys.set(k.key.keyID, k);
  }
  const roles: Record<string, { keyids: string[]; threshold: number }> = {};
  for (const [name, role] of Object.entries(r.root.signed.roles)) {
    roles[name] = { keyids: role.keyIDs, threshold: role.threshold };
  }
  roles[o.role] = { keyids: fresh.map((k) => k.key.keyID), threshold: before.threshold };
  const used = new Set(Object.values(roles).flatMap((x) => x.keyids));
  const allKeys = [...Object.values(r.root.signed.keys), ...fresh.map((k) => k.key)].filter((k) =>
    used.has(k.keyID),
  );
  const rebuilt = rootOf(r.root.signed.version + 1, expiry(o, "root"), allKeys, roles);
  const md = new Metadata(rebuilt);
  const signers = o.role === "root" ? [...oldRootSigners, ...fresh] : oldRootSigners;
  signWith(md, signers);
  await mkdir(path.join(o.keys, "revoked"), { recursive: true });
  for (const id of before.keyIDs) {
    const name = `${o.role}-${id.slice(0, 16)}.pem`;
    for (const dir of [o.keys, ...(o.rootKeyDirs ?? [])]) {
      if ((await readdir(dir).catch((): string[] => [])).includes(name))
        await rename(path.join(dir, name), path.join(o.keys, "revoked", name));
    }
    keys.delete(id);
  }
  const next: ChannelRepo = { ...r, root: md };
  await writeRepo(o.repo, resignChain(next, keys, o, true), true);
  return { rootVersion: rebuilt.version };
}

/** A root from plain data, through the library's own parser (its roles are built there). */
function rootOf(
  version: number,
  expires: string,
  keys: Key[],
  roles: Record<string, { keyids: string[]; threshold: number }>,
): Root {
  return Root.fromJSON({
    _type: "root",
    spec_version: SPEC_VERSION,
    version,
    expires,
    consistent_snapshot: false,
    keys: Object.fromEntries(keys.map((k) => [k.keyID, k.toJSON()])),
    roles,
  });
}

/**
 * Re-signs the chain after `edit` changed the targets, with `targetsSigners` in place of the
 * role's keys: how the tests build a channel signed by a revoked key or by too few keys, the
 * way a hostile or broken publisher would.
 */
export async function resignWith(
  o: SignOptions,
  edit: (targets: Targets) => void,
  targetsSigners: SigningKey[],
): Promise<void> {
  const r = await readRepo(o.repo);
  edit(r.targets.signed);
  await writeRepo(o.repo, resignChain(r, await loadAllKeys(o), o, true, targetsSigners), false);
}
