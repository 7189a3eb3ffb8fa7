// A signed channel's repository as files: the four top-level roles read from tuf/, re-signed
// as a chain (targets, then the snapshot naming it, then the timestamp naming that) and
// written back in the order that keeps a client reading meanwhile on a whole, older chain.
import { createHash } from "node:crypto";
import { mkdir, readFile, rename, writeFile } from "node:fs/promises";
import path from "node:path";
import {
  MetaFile,
  Metadata,
  MetadataKind,
  Root,
  Snapshot,
  Targets,
  Timestamp,
} from "@tufjs/models";
import { keysFor, signWith, type SigningKey } from "./tuf-keys.js";
import { ChannelSignError, expiry, SPEC_VERSION, tufDir, type SignOptions } from "./tuf-options.js";

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
export async function writeRepo(repo: string, r: ChannelRepo, rootChanged: boolean): Promise<void> {
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

/** Re-signs targets (version+1), then snapshot and timestamp naming it. */
export function resignChain(
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
