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
//
// Its pieces: what every command is told (tuf-options.ts), the keys (tuf-keys.ts), the
// repository read, re-signed and written (tuf-repo.ts), a release added, promoted and recalled
// (tuf-targets.ts); here, a channel's start, its refresh and its key rotation.
import { createHash } from "node:crypto";
import { mkdir, readdir, readFile, rename } from "node:fs/promises";
import path from "node:path";
import { Key, Metadata, Root, Snapshot, Targets, Timestamp } from "@tufjs/models";
import {
  keysFor,
  loadAllKeys,
  newKey,
  rootKeyPlacementWarnings,
  signWith,
  type SigningKey,
} from "./tuf-keys.js";
import {
  ChannelSignError,
  expiry,
  SPEC_VERSION,
  TUF_ROLES,
  tufDir,
  type InitOptions,
  type SignOptions,
  type TufRoleName,
} from "./tuf-options.js";
import { readRepo, resignChain, writeRepo, type ChannelRepo } from "./tuf-repo.js";

export {
  ChannelSignError,
  DEFAULT_EXPIRY_SECONDS,
  TUF_ROLES,
  tufDir,
  type ChannelDirs,
  type InitOptions,
  type SignOptions,
  type TufRoleName,
} from "./tuf-options.js";
export {
  loadAllKeys,
  loadKeys,
  newKey,
  rootKeyPlacementWarnings,
  signWith,
  tufKeyOf,
  type SigningKey,
} from "./tuf-keys.js";
export { metadataBytes, readRepo, type ChannelRepo } from "./tuf-repo.js";
export {
  addRelease,
  promoteRelease,
  recallRelease,
  type AddOptions,
  type PromoteOptions,
  type RecallOptions,
} from "./tuf-targets.js";

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
