// How a release is named in a signed channel: the target <channel>/<version>/release.yaml, its
// sha256 the release's catalog digest, and liken's signed facts in custom.liken (when it was
// added, how fast its waves open, whether it was recalled). Both the signing side
// (src/release/tuf.ts) and the client (tuf.ts) read the names from here.
import { VERSION_RE, isSafeVersion } from "./release.js";
import { evidenceOf, type SignedEvidence } from "./evidence.js";

/** Channel names: stable, beta, lts-2026 ... (a path segment, lowercase). */
export const CHANNEL_NAME_RE = /^[a-z0-9][a-z0-9-]{0,62}$/;
/** The key of liken's facts inside a target's custom field. */
export const LIKEN_TARGET_FIELD = "liken";

export interface TargetCustom {
  version: string;
  /** RFC 3339: when the release was added to the channel (the start of `delay`). */
  addedAt: string;
  /** How long the release's waves take to open for every follower (default: the Cluster's). */
  waveSeconds?: number;
  recalled?: { at: string; reason: string };
  /** What the ring before showed of it, signed by `liken promote` (evidence.ts). */
  evidence?: SignedEvidence;
}

export const targetPathOf = (channel: string, version: string): string =>
  `${channel}/${version}/release.yaml`;

/** A release as a signed channel names it, after the client verified the metadata. */
export interface ChannelRelease {
  channel: string;
  version: string;
  /** sha256:<hex> of release.yaml: the catalog digest. */
  digest: string;
  length: number;
  addedAt: Date;
  waveSeconds?: number;
  recalled?: { at: string; reason: string };
  /** Its signed evidence, when well formed and about this release (evidence.ts). */
  evidence?: SignedEvidence;
  path: string;
}

/**
 * The releases of `channel` among verified targets (path -> {length, hashes, custom}); a target
 * whose path or custom field is not liken's is ignored, one whose facts contradict its path is
 * left out (a signed but malformed entry must not become a release).
 */
export function releasesOf(
  targets: Record<
    string,
    { length: number; hashes: Record<string, string>; custom: Record<string, unknown> }
  >,
  channel: string,
): ChannelRelease[] {
  const out: ChannelRelease[] = [];
  for (const [p, t] of Object.entries(targets)) {
    const r = releaseOf(p, t, channel);
    if (r !== undefined) out.push(r);
  }
  return out.sort(
    (a, b) => a.addedAt.getTime() - b.addedAt.getTime() || a.version.localeCompare(b.version),
  );
}

function releaseOf(
  p: string,
  t: Parameters<typeof releasesOf>[0][string],
  channel: string,
): ChannelRelease | undefined {
  const m = /^([^/]+)\/([^/]+)\/release\.yaml$/.exec(p);
  if (m === null || m[1] !== channel) return undefined;
  const version = m[2]!;
  if (!VERSION_RE.test(version) || !isSafeVersion(version)) return undefined;
  const sha = t.hashes.sha256;
  if (sha === undefined || !/^[0-9a-f]{64}$/.test(sha)) return undefined;
  const c = t.custom[LIKEN_TARGET_FIELD] as Partial<TargetCustom> | undefined;
  if (c?.version !== version || typeof c.addedAt !== "string") return undefined;
  const addedAt = new Date(c.addedAt);
  if (Number.isNaN(addedAt.getTime())) return undefined;
  const r: ChannelRelease = {
    channel,
    version,
    digest: `sha256:${sha}`,
    length: t.length,
    addedAt,
    path: p,
  };
  withSignedFacts(r, c);
  return r;
}

/** The optional facts of custom.liken, each only when well formed. */
function withSignedFacts(r: ChannelRelease, c: Partial<TargetCustom>): void {
  if (typeof c.waveSeconds === "number" && c.waveSeconds >= 0) r.waveSeconds = c.waveSeconds;
  if (c.recalled !== undefined && typeof c.recalled.reason === "string") r.recalled = c.recalled;
  const evidence = c.evidence === undefined ? undefined : evidenceOf(c.evidence, r);
  if (evidence !== undefined) r.evidence = evidence;
}
