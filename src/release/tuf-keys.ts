// The keys of a signed channel: ed25519 keys made with node:crypto, one PEM per key in the keys
// directory (the root keys in a directory of their own each, encrypted when asked), read back
// by keyid; the TUF key record of each; signing metadata with them; and the keys of a role a
// signature needs, refused below the role's threshold.
import {
  createHash,
  createPrivateKey,
  generateKeyPairSync,
  sign,
  type KeyObject,
} from "node:crypto";
import { mkdir, readdir, readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import { Key, Metadata, Root, Signature, Snapshot, Targets, Timestamp } from "@tufjs/models";
import { ChannelSignError, type SignOptions, type TufRoleName } from "./tuf-options.js";

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

/** The signing keys of `role` in the repo's root that are in the keys directory; throws below the threshold. */
export function keysFor(
  root: Root,
  role: TufRoleName,
  keys: Map<string, SigningKey>,
): SigningKey[] {
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
