// The channel trust modes on the operator's side: each poll of a Cluster whose
// spec.releases.trust.mode is channel or channel+pinned runs the TUF client (verify/tuf.ts) on
// the metadata its status persisted, picks the release to take (follow.ts), and says what the
// status should record: the trusted metadata, the target, freshness, ChannelTrusted. A refusal
// takes the target away (no turn is granted: the fleet stays where it is), keeps the metadata
// trusted before, and names the role and what to do. Never throws.
import { type Cluster, type ReleaseRef } from "../../api/index.js";
import { rfc3339 } from "../../api/time.js";
import { revokedOf } from "../../release-decision/view.js";
import {
  readSignedChannel,
  type TrustedFiles,
  type TufFault,
  type TufRead,
} from "../../verify/tuf.js";
import type { ChannelRelease } from "../../verify/tuf-target.js";
import { decideFollow, type FollowDecision } from "./follow.js";
import type { ChannelView } from "./view.js";
import { type Pinned, clockBehind, refused, statusOf, trustedView } from "./trust-verdict.js";

export function metadataUrl(source: string): URL {
  return new URL("tuf/", source.endsWith("/") ? source : `${source}/`);
}

export function takenBefore(c: Cluster): ReleaseRef | undefined {
  const st = c.status?.trust;
  return st?.rootDigest === c.spec.releases.trust?.rootDigest
    ? (st?.taken ?? st?.target)
    : undefined;
}

export function trustedBefore(c: Cluster): TrustedFiles | undefined {
  const st = c.status?.trust;
  const m = st?.metadata;
  if (st?.rootDigest !== c.spec.releases.trust?.rootDigest || m?.root === undefined) {
    return undefined;
  }
  return { root: m.root, ...m };
}

/** The pick the TUF client runs on the verified releases: follow.ts, and what it decided. */
export function pickerOf(
  cluster: Cluster,
  spec: Pinned,
  now: Date,
): {
  pick: (releases: ChannelRelease[]) => ChannelRelease | undefined;
  decision: () => FollowDecision | undefined;
} {
  const before = cluster.status?.trust;
  let decision: FollowDecision | undefined;
  const pick = (releases: ChannelRelease[]): ChannelRelease | undefined => {
    decision = decideFollow({
      releases,
      current: before?.rootDigest === spec.rootDigest ? (before.taken ?? before.target) : undefined,
      version: cluster.spec.version,
      follow: spec.follow,
      uid: cluster.metadata.uid ?? cluster.metadata.name,
      now,
      // A release this Cluster reverted away from is never followed again until a person
      // clears it (docs/revert.md).
      skip: (r) => revokedOf(cluster, r) !== undefined,
    });
    return decision.target;
  };
  return { pick, decision: () => decision };
}

/** The TUF client's read, and what follow.ts picked while it ran. */
export async function verified(
  cluster: Cluster,
  spec: Pinned,
  url: URL,
  now: Date,
): Promise<TufRead & { decision?: FollowDecision }> {
  const { pick, decision } = pickerOf(cluster, spec, now);
  const read = await readSignedChannel({
    metadataUrl: url,
    trusted: trustedBefore(cluster),
    rootDigest: spec.rootDigest,
    channel: spec.channel,
    now,
    acceptExpiredSeconds: spec.acceptExpiredSeconds ?? 0,
    pick,
  });
  const d = decision();
  return d === undefined ? read : { ...read, decision: d };
}

/** Reads the signed channel of `cluster` (mode channel or channel+pinned). */
export async function readTrust(cluster: Cluster, now: () => Date): Promise<ChannelView> {
  const started = now();
  const pre = preconditions(cluster, started);
  const read = "fault" in pre ? undefined : await verified(cluster, pre.spec, pre.url, started);
  return viewOfRead(cluster, started, pre, read, now);
}

/**
 * readTrust with the TUF client's outcome given (`tuf`: what it returns for the pick it runs,
 * synchronously): the simulator's channel (src/sim) drives the operator's real verdict with it.
 */
export function trustViewOf(
  cluster: Cluster,
  now: () => Date,
  tuf: (pick: (releases: ChannelRelease[]) => ChannelRelease | undefined) => TufRead,
): ChannelView {
  const started = now();
  const pre = preconditions(cluster, started);
  if ("fault" in pre) return viewOfRead(cluster, started, pre, undefined, now);
  const { pick, decision } = pickerOf(cluster, pre.spec, started);
  const read = tuf(pick);
  const d = decision();
  return viewOfRead(cluster, started, pre, d === undefined ? read : { ...read, decision: d }, now);
}

/** The status and conditions one read of the channel makes (pure). */
export function viewOfRead(
  cluster: Cluster,
  started: Date,
  pre: ReturnType<typeof preconditions>,
  read: (TufRead & { decision?: FollowDecision }) | undefined,
  now: () => Date,
): ChannelView {
  const spec = cluster.spec.releases.trust;
  const channel: ChannelView["channel"] = {
    ...cluster.status?.channel,
    lastCheckTime: rfc3339(started),
  };
  const base = {
    mode: spec?.mode ?? "channel",
    ...(spec?.rootDigest === undefined ? {} : { rootDigest: spec.rootDigest }),
  } as const;
  const refuse = (fault: TufFault, url: string): ChannelView =>
    refused(cluster, channel, base, fault, url, started);
  if ("fault" in pre) return refuse(pre.fault, pre.url);
  if (read === undefined || !read.ok) {
    const fault = read?.ok === false ? read.fault : missing;
    return refuse(fault, pre.url.href);
  }
  channel.lastSuccessTime = rfc3339(now());
  return trustedView(
    cluster,
    channel,
    { ...base, ...statusOf(read, started, takenBefore(cluster)) },
    read,
    pre.url,
    started,
  );
}

export const missing: TufFault = {
  reason: "MetadataInvalid",
  role: "root",
  message: "no read was made",
};

/** What must hold before the channel is read: a complete spec, a URL, a clock not gone back. */
export function preconditions(
  cluster: Cluster,
  now: Date,
): { spec: Pinned; url: URL } | { fault: TufFault; url: string } {
  const spec = cluster.spec.releases.trust;
  const source = cluster.spec.releases.source;
  if (spec?.rootDigest === undefined || spec.channel === undefined) {
    const message = "spec.releases.trust names no channel or rootDigest";
    return { fault: { reason: "MetadataInvalid", role: "root", message }, url: source };
  }
  let url: URL;
  try {
    url = metadataUrl(source);
  } catch (e) {
    const message = `spec.releases.source is not a URL (${String(e)})`;
    return { fault: { reason: "ChannelUnreachable", role: "root", message }, url: source };
  }
  const behind = clockBehind(cluster, now);
  if (behind !== undefined) return { fault: behind, url: url.href };
  return { spec: { ...spec, rootDigest: spec.rootDigest, channel: spec.channel }, url };
}
