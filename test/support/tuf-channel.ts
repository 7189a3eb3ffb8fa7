// A signed channel on disk and over real HTTP for tests: releases built with the real release
// tooling, signed with `liken release sign ...`'s functions, served by `liken channel serve`'s
// server. The attack helpers keep copies of served files and put them back (a replay), or write
// metadata signed with the wrong keys, the way a hostile mirror would.
import { cp, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { buildRelease } from "../../src/release/build.js";
import { serveChannel, type ChannelServer } from "../../src/release/serve.js";
import { createPrivateKey, createHash } from "node:crypto";
import { copyFile, mkdir, readdir } from "node:fs/promises";
import { TargetFile } from "@tufjs/models";
import {
  addRelease,
  initChannel,
  resignWith,
  tufDir,
  tufKeyOf,
  type InitOptions,
  type SigningKey,
} from "../../src/release/tuf.js";
import { LIKEN_TARGET_FIELD, targetPathOf } from "../../src/verify/tuf-target.js";

export interface TestChannel {
  repo: string;
  keys: string;
  rootDigest: string;
  server: ChannelServer;
  /** <server>/ (spec.releases.source) */
  source: string;
  /** Builds a tiny release <version> and adds it to `channel`. */
  publish(
    version: string,
    channel?: string,
    opts?: { now?: Date; waveSeconds?: number },
  ): Promise<string>;
  /** Builds <version> and adds it as a target signed only by `signers` (a hostile publisher). */
  publishSignedBy(version: string, signers: SigningKey[], payload?: string): Promise<string>;
  /** The private keys of a role's files in the keys directory (or under keys/revoked). */
  keysOf(role: string, where?: "current" | "revoked"): Promise<SigningKey[]>;
  /** A copy of the served tuf/ directory, to serve again later (a replay, a frozen mirror). */
  save(): Promise<string>;
  serveSaved(copy: string): Promise<void>;
  close(): Promise<void>;
}

export async function testChannel(init: Partial<InitOptions> = {}): Promise<TestChannel> {
  const base = await mkdtemp(path.join(tmpdir(), "liken-tuf-test-"));
  const repo = path.join(base, "channel");
  const keys = path.join(base, "keys");
  const { rootDigest } = await initChannel({ repo, keys, ...init });
  const server = await serveChannel(repo, 0, "127.0.0.1");
  let saves = 0;
  /** A rebuild (another payload) goes to its own directory: the published one never changes. */
  const build = async (
    version: string,
    payload?: string,
  ): Promise<{ bytes: Buffer; file: string }> => {
    const art = path.join(base, `${version}${payload === undefined ? "" : "-rebuilt"}.img`);
    await writeFile(art, payload ?? `payload of ${version}\n`);
    const out = payload === undefined ? repo : path.join(base, "rebuilt");
    await buildRelease({ version, out, artifacts: [{ name: "rootfs", file: art }] });
    const file = path.join(out, version, "release.yaml");
    return { bytes: await readFile(file), file };
  };
  return {
    repo,
    keys,
    rootDigest,
    server,
    source: server.url,
    async publishSignedBy(version, signers, payload) {
      const { bytes, file } = await build(version, payload);
      const tpath = targetPathOf("stable", version);
      const dest = path.join(tufDir(repo), "targets", tpath);
      await mkdir(path.dirname(dest), { recursive: true });
      await copyFile(file, dest);
      const sha = createHash("sha256").update(bytes).digest("hex");
      await resignWith(
        { repo, keys },
        (t) => {
          t.targets[tpath] = new TargetFile({
            path: tpath,
            length: bytes.length,
            hashes: { sha256: sha },
            unrecognizedFields: {
              custom: { [LIKEN_TARGET_FIELD]: { version, addedAt: new Date().toISOString() } },
            },
          });
        },
        signers,
      );
      return `sha256:${sha}`;
    },
    async keysOf(role, where = "current") {
      const dir = where === "current" ? keys : path.join(keys, "revoked");
      const names = (await readdir(dir)).filter(
        (n) => n.startsWith(`${role}-`) && n.endsWith(".pem"),
      );
      const out: SigningKey[] = [];
      for (const n of names) {
        const priv = createPrivateKey(await readFile(path.join(dir, n)));
        const jwk = priv.export({ format: "jwk" });
        out.push({ key: tufKeyOf(Buffer.from(jwk.x ?? "", "base64url")), private: priv });
      }
      return out;
    },
    async publish(version, channel = "stable", o = {}) {
      await build(version);
      const r = await addRelease({
        repo,
        keys,
        channel,
        version,
        ...(o.now === undefined ? {} : { now: o.now }),
        ...(o.waveSeconds === undefined ? {} : { waveSeconds: o.waveSeconds }),
      });
      return r.digest;
    },
    async save() {
      const copy = path.join(base, `saved-${++saves}`);
      await cp(tufDir(repo), copy, { recursive: true });
      return copy;
    },
    async serveSaved(copy) {
      await rm(tufDir(repo), { recursive: true, force: true });
      await cp(copy, tufDir(repo), { recursive: true });
    },
    async close() {
      await server.close();
      await rm(base, { recursive: true, force: true });
    },
  };
}

export async function readJsonFile(file: string): Promise<Record<string, unknown>> {
  return JSON.parse(await readFile(file, "utf8")) as Record<string, unknown>;
}
