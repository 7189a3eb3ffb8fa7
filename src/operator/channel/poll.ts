// The release channel: AVAILABLE is the newest version <source>/channel.yaml announces.
// The operator reads it on an interval and whenever the liken.sh/check-releases annotation
// changes value (the value means nothing; the change is the request). A channel that
// cannot be read or parsed sets ChannelReachable=False and keeps the last AVAILABLE; it
// never touches turns, so a rollout goes on whatever the channel does.
import { ANNOTATION_CHECK_RELEASES, type Cluster, type ClusterCondition } from "../../api/index.js";
import { MAX_CHANNEL_BYTES, newestVersion, parseChannel } from "../../verify/channel.js";
import { errorText } from "../../errors.js";
import { fetchDocument } from "../../verify/fetch.js";
import type { ChannelView } from "./view.js";
import { rfc3339 } from "../../api/time.js";
import { stamped } from "../view/conditions.js";
import { createHash } from "node:crypto";
import { CLUSTER_STATUS_BOUNDS, maxLengthOf } from "../../api/bounds.js";

const HANDLED_MAX = maxLengthOf(CLUSTER_STATUS_BOUNDS, "channel.handledCheckReleases");

/**
 * What status.channel.handledCheckReleases records for an annotation value: the value, or
 * "sha256:<hex>" of it when it is longer than the field holds (an annotation may be up to
 * 256 KiB). A cut value would never equal the annotation again, and the channel would be
 * read on every tick; a digest is equal exactly when the value is.
 */
export function handledForm(value: string): string {
  if (value.length <= HANDLED_MAX) return value;
  return `sha256:${createHash("sha256").update(value).digest("hex")}`;
}

/** 5 minutes: a release a day is plenty fresh at this rate; the annotation is the fast path. */
export const DEFAULT_CHANNEL_INTERVAL_MS = 5 * 60_000;
/** A channel that does not answer within this is unreachable for this poll. */
const FETCH_TIMEOUT_MS = 15_000;

type ChannelCondition = Extract<ClusterCondition, { type: "ChannelReachable" }>;

export interface PollState {
  /** When this copy last started a poll of this cluster's channel. */
  lastPollAt?: Date;
}

/** Whether to read the channel now (pure). */
export function pollDue(
  cluster: Cluster,
  state: PollState,
  now: Date,
  intervalMs: number,
): { due: boolean; why: "annotation" | "interval" | "first" | "none" } {
  const wanted = cluster.metadata.annotations?.[ANNOTATION_CHECK_RELEASES];
  const handled = cluster.status?.channel?.handledCheckReleases;
  if (wanted !== undefined && handledForm(wanted) !== handled) {
    return { due: true, why: "annotation" };
  }
  if (state.lastPollAt === undefined) return { due: true, why: "first" };
  if (now.getTime() - state.lastPollAt.getTime() >= intervalMs) {
    return { due: true, why: "interval" };
  }
  return { due: false, why: "none" };
}

export function channelUrl(source: string): URL {
  return new URL("channel.yaml", source.endsWith("/") ? source : `${source}/`);
}

/**
 * Reads and parses the channel of `cluster`, and says what the status should record.
 * Never throws: every failure becomes the condition.
 */
export async function readChannel(cluster: Cluster, now: () => Date): Promise<ChannelView> {
  const before = cluster.status;
  const annotation = cluster.metadata.annotations?.[ANNOTATION_CHECK_RELEASES];
  const started = now();
  const channel: ChannelView["channel"] = {
    ...before?.channel,
    lastCheckTime: rfc3339(started),
    ...(annotation === undefined ? {} : { handledCheckReleases: handledForm(annotation) }),
  };
  const cond = (
    status: ChannelCondition["status"],
    reason: ChannelCondition["reason"],
    message: string,
  ): ChannelCondition =>
    stamped<ChannelCondition>(
      before?.conditions,
      { type: "ChannelReachable", status, reason, message },
      rfc3339(started),
    );
  let url: URL;
  try {
    url = channelUrl(cluster.spec.releases.source);
  } catch (e) {
    const msg = `spec.releases.source ${JSON.stringify(cluster.spec.releases.source)} is not a URL (${String(e)}); fix it with kubectl edit cluster ${cluster.metadata.name}`;
    return { channel, condition: cond("False", "ChannelUnreachable", msg) };
  }
  const fetched = await fetchChannel(url);
  if (!fetched.ok) {
    const msg = `cannot read ${url.href}: ${fetched.why}; AVAILABLE keeps ${before?.available ?? "nothing"} and the rollout is not affected; liken tries again on the next poll`;
    return { channel, condition: cond("False", "ChannelUnreachable", msg) };
  }
  const bytes = fetched.bytes;
  try {
    const parsed = parseChannel(bytes);
    const newest = newestVersion(parsed);
    channel.lastSuccessTime = rfc3339(now());
    const msg = newest
      ? `${url.href} announces ${parsed.versions.length} release(s), the newest ${newest.version}`
      : `${url.href} announces no release`;
    const view: ChannelView = { channel, condition: cond("True", "ChannelRead", msg) };
    if (newest !== undefined) view.available = newest.version;
    return view;
  } catch (e) {
    const why = errorText(e);
    const msg = `${url.href} is not a valid channel document: ${why}; AVAILABLE keeps ${before?.available ?? "nothing"} and the rollout is not affected`;
    return { channel, condition: cond("False", "ChannelMalformed", msg) };
  }
}

async function fetchChannel(
  url: URL,
): Promise<{ ok: true; bytes: Buffer } | { ok: false; why: string }> {
  try {
    const bytes = await fetchDocument(url, MAX_CHANNEL_BYTES, {
      idleTimeoutMs: FETCH_TIMEOUT_MS,
      signal: AbortSignal.timeout(FETCH_TIMEOUT_MS),
    });
    return { ok: true, bytes };
  } catch (e) {
    return { ok: false, why: errorText(e) };
  }
}
