// A release's life in a signed channel: added (its release.yaml a target of the channel),
// promoted to the next channel with the evidence the ring before showed (`liken promote`),
// and recalled, each a new targets version signed with the chain after it.
import { createHash } from "node:crypto";
import { copyFile, mkdir, readFile } from "node:fs/promises";
import path from "node:path";
import { TargetFile } from "@tufjs/models";
import { parseRelease, isSafeVersion } from "../verify/release.js";
import type { SignedEvidence } from "../verify/evidence.js";
import {
  CHANNEL_NAME_RE,
  LIKEN_TARGET_FIELD,
  targetPathOf,
  type TargetCustom,
} from "../verify/tuf-target.js";
import { loadAllKeys } from "./tuf-keys.js";
import { ChannelSignError, tufDir, type SignOptions } from "./tuf-options.js";
import { readRepo, resignChain, writeRepo } from "./tuf-repo.js";

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
