// The simulated signed channel (issue 38): the releases a publisher signed, their recalls and
// removals, when the metadata expires, and whether the channel can be reached. tuf-js does not
// run here: `tufOutcome` returns what its read documents for each case (verify/tuf.ts TufRead),
// and the operator's real verdict (operator/trust.ts trustViewOf, with follow.ts's pick) turns
// it into status.trust and the conditions decide() records. Left out: key rotation, rollback,
// signature and hash faults (refusals the unit and integration tiers cover with the real client),
// waves and delays (follow opens every release at once here).
import type { ReleaseRef } from "../api/index.js";
import type { TufRead } from "../verify/tuf.js";
import type { ChannelRelease } from "../verify/tuf-target.js";
import { rfc } from "./machine.js";

/** How long one signing of the timestamp is valid (the publisher re-signs every minute). */
export const METADATA_LIFETIME_MS = 180_000;
const REFRESH_MS = 60_000;

export interface SimChannel {
  releases: ChannelRelease[];
  /** When the metadata last signed expires (ms, the true clock). */
  expiresAt: number;
  /** The publisher re-signs (false: it stopped, and the metadata expires). */
  refreshing: boolean;
  /** The channel answers (false: a span when it cannot be reached). */
  reachable: boolean;
  /** Bumped on each change: the metadata's version (the trusted files' text). */
  version: number;
  signedAt: number;
}

const entry = (r: ReleaseRef, addedAt: number): ChannelRelease => ({
  channel: "stable",
  version: r.version,
  digest: r.digest,
  length: 1024,
  addedAt: new Date(addedAt),
  path: `stable/${r.version}/release.yaml`,
});

export function channelOf(releases: readonly ReleaseRef[], now: number): SimChannel {
  return {
    releases: releases.map((r) => entry(r, now - 86_400_000)),
    expiresAt: now + METADATA_LIFETIME_MS,
    refreshing: true,
    reachable: true,
    version: 1,
    signedAt: now,
  };
}

function sign(ch: SimChannel, now: number): void {
  ch.version++;
  ch.signedAt = now;
  ch.expiresAt = now + METADATA_LIFETIME_MS;
}

/** One second of the publisher: re-sign the timestamp while it refreshes. */
export function publisherTick(ch: SimChannel, now: number): void {
  if (ch.refreshing && now - ch.signedAt >= REFRESH_MS) sign(ch, now);
}

/** `liken release channel add`: a new release, signed. */
export function publish(ch: SimChannel, r: ReleaseRef, now: number): void {
  if (ch.releases.some((x) => x.version === r.version)) return;
  ch.releases = [...ch.releases, entry(r, now)];
  if (ch.refreshing) sign(ch, now);
}

/** `liken release channel recall`: the target stays, marked recalled. */
export function recall(ch: SimChannel, version: string, now: number): void {
  ch.releases = ch.releases.map((x) =>
    x.version === version && x.recalled === undefined
      ? { ...x, recalled: { at: rfc(now), reason: "simulated recall" } }
      : x,
  );
  if (ch.refreshing) sign(ch, now);
}

/** Any TUF tool's remove: the target leaves the signed targets. */
export function remove(ch: SimChannel, version: string, now: number): void {
  ch.releases = ch.releases.filter((x) => x.version !== version);
  if (ch.refreshing) sign(ch, now);
}

/**
 * What the TUF client returns to a read at `clock` (the operator's clock, which may run ahead):
 * unreachable; expired beyond acceptExpiredSeconds (refused, MetadataExpired); or verified, with
 * the release the pick chose.
 */
export function tufOutcome(
  ch: SimChannel,
  clock: number,
  acceptExpiredSeconds: number,
  pick: (releases: ChannelRelease[]) => ChannelRelease | undefined,
): TufRead {
  if (!ch.reachable) {
    return {
      ok: false,
      fault: { reason: "ChannelUnreachable", role: "timestamp", message: "connect ECONNREFUSED" },
    };
  }
  if (clock > ch.expiresAt + acceptExpiredSeconds * 1000) {
    return {
      ok: false,
      fault: {
        reason: "MetadataExpired",
        role: "timestamp",
        message: `timestamp.json expired at ${rfc(ch.expiresAt)}`,
      },
    };
  }
  const releases = [...ch.releases];
  const verified = pick(releases);
  const text = `{"signed":{"version":${ch.version}}}`;
  return {
    ok: true,
    files: { root: '{"signed":{"version":1}}', timestamp: text, snapshot: text, targets: text },
    releases,
    expires: { role: "timestamp", at: new Date(ch.expiresAt) },
    verified,
  };
}
