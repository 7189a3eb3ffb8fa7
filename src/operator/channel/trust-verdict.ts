// The channel's verdict as the Cluster records it, pure: status.trust from a verified read,
// the ChannelTrusted condition (its reason and what a person does about it), and the holds of
// a refused read or an expired trust (trust.ts reads, this module judges).
import {
  TRUST_RECALLS_MAX_ITEMS,
  type Cluster,
  type ClusterCondition,
  type ReleaseRef,
  type TrustReason,
  type TrustSpec,
  type TrustStatus,
} from "../../api/index.js";
import { rfc3339 } from "../../api/time.js";
import { stamped } from "../view/conditions.js";
import { type TufFault, type TufRead } from "../../verify/tuf.js";
import type { ChannelRelease } from "../../verify/tuf-target.js";
import { summaryOf } from "../../verify/evidence.js";
import { type FollowDecision } from "./follow.js";
import { decideRelease } from "../../release-decision/decide.js";
import { apiTimeOf, clockVerdict } from "../../release-decision/clock.js";
import { compareVersions } from "../../release-decision/version-order.js";
import type { ChannelView } from "./view.js";

/** A channel release as the Cluster names it: version and digest. */
export const ref = (r: ChannelRelease | undefined): ReleaseRef | undefined =>
  r === undefined ? undefined : { version: r.version, digest: r.digest };

export type TrustCondition = Extract<ClusterCondition, { type: "ChannelTrusted" }>;

/** What a person does about each refusal (docs/releases.md says the same at more length). */
export const TODO: Readonly<Record<TrustReason, string>> = {
  MetadataVerified: "",
  RootPinMismatch:
    "check spec.releases.source and spec.releases.trust.rootDigest (the digest `liken release channel init` printed)",
  MetadataExpired:
    "the channel's publisher must re-sign it (`liken release channel refresh`); if this operator's clock is wrong, fix it; an air-gapped fleet may set spec.releases.trust.acceptExpiredSeconds",
  MetadataRollback:
    "the server replays older metadata than this Cluster trusts (a stale mirror or an attack): serve the current channel",
  RootRotationInvalid:
    "a root must follow the trusted one version by version, signed by the old and the new root keys: publish every root version (tuf/<N>.root.json)",
  SignatureThreshold:
    "the metadata lacks valid signatures of the role's keys (a revoked or unknown key, or too few): re-sign it with the keys the channel's root names",
  LengthOrHashMismatch:
    "a file differs from what the signed metadata says: re-publish the channel as `liken release channel` wrote it",
  DigestChanged: "a version names one build: publish the rebuilt release under a new version",
  ClockBehind:
    "fix this operator's clock (NTP); liken does not judge expiry on a clock that went back",
  ChannelUnreachable: "liken tries again on the next poll",
  MetadataInvalid: "re-publish the channel as `liken release channel` wrote it",
  CatalogDisagrees:
    "add the channel's release to spec.releases.catalog with the same digest, or find out why the two differ",
  NotInChannel: "",
  ReleaseRecalled: "",
};

export type Pinned = TrustSpec & { rootDigest: string; channel: string };
export type Read = Extract<TufRead, { ok: true }> & { decision?: FollowDecision };

/** The newer of two releases by version (the one a follower must never go below). */
export function newer(
  a: ReleaseRef | undefined,
  b: ReleaseRef | undefined,
): ReleaseRef | undefined {
  if (a === undefined || b === undefined) return a ?? b;
  return compareVersions(a.version, b.version) >= 0 ? a : b;
}

/** The signed evidence the target carries, summed (what requireEvidence reads). */
export function withEvidence(
  st: Omit<TrustStatus, "mode">,
  target: ChannelRelease | undefined,
): void {
  if (target?.evidence !== undefined) st.evidence = summaryOf(target.evidence);
}

export function statusOf(
  read: Read,
  at: Date,
  taken0: ReleaseRef | undefined,
): Omit<TrustStatus, "mode"> {
  const d = read.decision;
  const expired = read.expires.at.getTime() <= at.getTime();
  const st: Omit<TrustStatus, "mode"> = {
    verifiedAt: rfc3339(at),
    expiresAt: rfc3339(read.expires.at),
    expiresRole: read.expires.role,
    freshness: expired
      ? `expired ${rfc3339(read.expires.at)} (${read.expires.role}), accepted`
      : `fresh until ${rfc3339(read.expires.at)}`,
    metadata: read.files,
  };
  const target = ref(d?.target);
  if (target !== undefined) st.target = target;
  withEvidence(st, d?.target);
  const taken = newer(target, taken0);
  if (taken !== undefined) st.taken = taken;
  const newest = ref(d?.newest);
  if (newest !== undefined) st.newest = newest;
  if (d?.waveOpensAt !== undefined) st.waveOpensAt = rfc3339(d.waveOpensAt);
  if (d?.recalled !== undefined) st.recalled = d.recalled;
  if (d !== undefined && d.recalls.length > 0)
    st.recalls = d.recalls.slice(-TRUST_RECALLS_MAX_ITEMS);
  return st;
}

export function trustedView(
  cluster: Cluster,
  channel: ChannelView["channel"],
  trust: TrustStatus,
  read: Read,
  url: URL,
  at: Date,
): ChannelView {
  const d = read.decision ?? { target: undefined, newest: undefined, recalls: [] };
  const cond = verdict(cluster, d, trust.target, url.href, read.releases.length, at);
  const reach = reachable(cluster, "True", "ChannelRead", `${url.href} is a signed channel`, at);
  const view: ChannelView = {
    channel,
    condition: reach,
    trust: { status: trust, condition: cond },
  };
  if (trust.newest !== undefined) view.available = trust.newest.version;
  return view;
}

/**
 * A clock that reads before the API server's stamps on the Cluster (or, without them, before the
 * last verification) cannot judge expiry (release/clock.ts).
 */
export function clockBehind(cluster: Cluster, now: Date): TufFault | undefined {
  const v = cluster.status?.trust?.verifiedAt;
  const c = clockVerdict(now, v === undefined ? undefined : new Date(v), apiTimeOf(cluster));
  if (c.kind !== "behind") return undefined;
  return { reason: "ClockBehind", role: "timestamp", message: c.message };
}

export function verdict(
  cluster: Cluster,
  d: FollowDecision,
  target: ReleaseRef | undefined,
  url: string,
  count: number,
  at: Date,
): TrustCondition {
  if (d.fault !== undefined)
    return trustCondition(cluster, "False", d.fault.reason, d.fault.message, at);
  if (cluster.spec.releases.trust?.mode === "channel+pinned" && target !== undefined) {
    const entry = cluster.spec.releases.catalog?.find((e) => e.version === target.version);
    if (entry?.digest !== target.digest) {
      const has = entry === undefined ? "names no such version" : `names digest ${entry.digest}`;
      return trustCondition(
        cluster,
        "False",
        "CatalogDisagrees",
        `the signed channel vouches for ${target.version} with digest ${target.digest}, but spec.releases.catalog ${has}; channel+pinned moves only when both agree: ${TODO.CatalogDisagrees}`,
        at,
      );
    }
  }
  const what =
    target === undefined
      ? "no release to take yet"
      : `the target ${target.version} (${target.digest})`;
  const wave =
    d.waveOpensAt === undefined || d.newest === undefined
      ? ""
      : `; ${d.newest.version} opens for this Cluster's wave at ${rfc3339(d.waveOpensAt)}`;
  return trustCondition(
    cluster,
    "True",
    "MetadataVerified",
    `${url}: metadata verified, ${count} release(s) in the channel, ${what}${wave}`,
    at,
  );
}

export function refused(
  cluster: Cluster,
  channel: ChannelView["channel"],
  base: Pick<TrustStatus, "mode" | "rootDigest">,
  fault: TufFault,
  url: string,
  at: Date,
): ChannelView {
  const old = cluster.status?.trust;
  // The trusted metadata stays (a refusal never lowers what is trusted); the target goes, so no
  // turn is granted, unless the channel is only unreachable: what it vouched for still holds
  // until it expires (acceptExpiredSeconds included), and a network blip must not stall a
  // rollout. Past that, the release decision holds (TUF's freeze attack: an attacker who blocks
  // the channel must not keep a recalled release rolling out).
  const unreachable = fault.reason === "ChannelUnreachable" && old?.rootDigest === base.rootDigest;
  const expired = unreachable ? expiredHold(cluster, old, at) : undefined;
  const keep = unreachable && expired === undefined;
  const trust: TrustStatus = {
    ...(old?.rootDigest === base.rootDigest ? old : {}),
    ...base,
    freshness: `refused: ${fault.reason} (${fault.role})`,
  };
  if (!keep) {
    delete trust.target;
    delete trust.evidence;
  }
  const todo = TODO[fault.reason];
  const fleet =
    keep && trust.target !== undefined
      ? `the rollout to ${trust.target.version} goes on`
      : "no turn is granted and the fleet stays where it is";
  const message =
    expired !== undefined
      ? `${fault.role} metadata of ${url}: ${fault.reason}: ${fault.message}; ${expired}`
      : `${fault.role} metadata of ${url}: ${fault.reason}: ${fault.message}; ${fleet}${todo === "" ? "" : `; ${todo}`}`;
  const reach =
    fault.reason === "ChannelUnreachable"
      ? reachable(cluster, "False", "ChannelUnreachable", message, at)
      : reachable(
          cluster,
          "True",
          "ChannelRead",
          `${url} answered (its metadata was refused: ChannelTrusted)`,
          at,
        );
  return {
    channel,
    condition: reach,
    trust: {
      status: trust,
      condition: trustCondition(
        cluster,
        "False",
        expired === undefined ? fault.reason : "MetadataExpired",
        message,
        at,
      ),
      fault,
    },
  };
}

/** The release decision's TrustExpired hold on what the unreachable channel vouched for. */
export function expiredHold(
  cluster: Cluster,
  old: TrustStatus | undefined,
  at: Date,
): string | undefined {
  const target = old?.target ?? old?.taken;
  if (target === undefined) return undefined;
  const d = decideRelease({
    chosen: target,
    via: "spec",
    trust: {
      vouches: true,
      reachable: false,
      acceptExpiredSeconds: cluster.spec.releases.trust?.acceptExpiredSeconds ?? 0,
      ...(old?.expiresAt === undefined ? {} : { expiresAt: new Date(old.expiresAt) }),
    },
    recalls: [],
    revoked: [],
    revert: undefined,
    now: at,
  });
  return d.kind === "hold" && d.hold.rule === "TrustExpired" ? d.hold.message : undefined;
}

export function trustCondition(
  cluster: Cluster,
  status: TrustCondition["status"],
  reason: TrustReason,
  message: string,
  at: Date,
): TrustCondition {
  return stamped<TrustCondition>(
    cluster.status?.conditions,
    { type: "ChannelTrusted", status, reason, message },
    rfc3339(at),
  );
}

export function reachable(
  cluster: Cluster,
  status: ChannelView["condition"]["status"],
  reason: ChannelView["condition"]["reason"],
  message: string,
  at: Date,
): ChannelView["condition"] {
  return stamped<ChannelView["condition"]>(
    cluster.status?.conditions,
    { type: "ChannelReachable", status, reason, message },
    rfc3339(at),
  );
}
