// The channel document (<source>/channel.yaml): the versions a channel announces, newest last.
import { DIGEST_RE } from "./digest.js";
import { parseCappedYaml, Fields } from "./document.js";
import { API_VERSION, isSafeVersion, VERSION_RE } from "./release.js";

/** 256 KiB: thousands of entries; more is hostile or a mistake. */
export const MAX_CHANNEL_BYTES = 256 * 1024;
export const MAX_CHANNEL_ENTRIES = 2000;

export interface ChannelEntry {
  version: string;
  /** The digest of that version's release.yaml (informational: the catalog is the root). */
  digest: string;
}

export interface Channel {
  apiVersion: typeof API_VERSION;
  kind: "Channel";
  versions: ChannelEntry[];
}

export function parseChannel(bytes: Uint8Array): Channel {
  const f = Fields.root("channel.yaml", parseCappedYaml(bytes, "channel.yaml", MAX_CHANNEL_BYTES));
  f.only(["apiVersion", "kind", "versions"]);
  if (f.str("apiVersion") !== API_VERSION) f.fail("apiVersion", `must be ${API_VERSION}`);
  if (f.str("kind") !== "Channel") f.fail("kind", "must be Channel");
  const seen = new Set<string>();
  const versions = f.list("versions", MAX_CHANNEL_ENTRIES).map((v, i) => {
    const e = f.item("versions", i, v).only(["version", "digest"]);
    const version = e.str("version", VERSION_RE, "letters, digits, '.', '_', '+', '-'");
    if (!isSafeVersion(version)) e.fail("version", "must not contain '..'");
    if (seen.has(version)) e.fail("version", `${version} is announced twice`);
    seen.add(version);
    return { version, digest: e.str("digest", DIGEST_RE, "sha256: and 64 lowercase hex digits") };
  });
  return { apiVersion: API_VERSION, kind: "Channel", versions };
}

/** AVAILABLE: the newest version the channel announces (the last entry), if any. */
export function newestVersion(c: Channel): ChannelEntry | undefined {
  return c.versions.at(-1);
}
