// Which release of a signed channel a Cluster takes, pure. With spec.version set, that release
// (if the channel names it and did not recall it). Releases are ordered by version, as the
// NEWEST column orders them (version-order.ts), not by when they were added. With follow, the newest release whose wave
// opened for this Cluster: it has been in the channel `delaySeconds`, and its waves opened as
// far as this Cluster's position (from its UID: many Clusters following one channel do not all
// move in the same hour, as Bottlerocket's seeds and FCOS's rollout wariness). Which releases
// may be taken at all is the release decision's (release/decide.ts): never one recalled or
// revoked, never one older than the release taken (no downgrade by following, also when the
// taken release left the signed targets: any TUF tool can remove a target).
import { createHash } from "node:crypto";
import type { FollowSpec, ReleaseRef } from "../../api/index.js";
import type { ChannelRelease } from "../../verify/tuf-target.js";
import { compareVersions } from "../../release-decision/version-order.js";
import { below } from "../../release-decision/decide.js";

/** Oldest first, by version (as the VERSION and NEWEST columns order them). */
const byVersion = (rs: readonly ChannelRelease[]): ChannelRelease[] =>
  [...rs].sort((a, b) => compareVersions(a.version, b.version));

export interface FollowInput {
  releases: readonly ChannelRelease[];
  /** What the channel vouched for before (status.trust.target). */
  current: ReleaseRef | undefined;
  /** spec.version (no follow). */
  version: string | undefined;
  follow: FollowSpec | undefined;
  uid: string;
  now: Date;
  /**
   * Releases never to take though the channel offers them. The fleet-wide revert (issue 27)
   * plugs status.revokedReleases in here: `(r) => revoked.some((x) => x.digest === r.digest)`.
   */
  skip?: (r: ChannelRelease) => boolean;
}

export type FollowFault = { reason: "NotInChannel" | "ReleaseRecalled"; message: string };

/** A release the channel recalled (status.trust.recalls). */
export interface ChannelRecall {
  version: string;
  digest: string;
  reason?: string;
}

export interface FollowDecision {
  /** The release to move to (verified to its bytes before it is written). */
  target: ChannelRelease | undefined;
  /** The newest release this Cluster may ever take (AVAILABLE). */
  newest: ChannelRelease | undefined;
  /** When this Cluster's wave opens for `newest`, while it is not the target. */
  waveOpensAt?: Date;
  recalled?: { version: string; reason: string };
  /** Every release of the channel it recalled, oldest first (status.trust.recalls). */
  recalls: ChannelRecall[];
  fault?: FollowFault;
}

function recallsOf(rs: readonly ChannelRelease[]): ChannelRecall[] {
  return byVersion(rs).flatMap((r) =>
    r.recalled === undefined
      ? []
      : [{ version: r.version, digest: r.digest, reason: r.recalled.reason }],
  );
}

/** This Cluster's place among all followers, in [0, 1): the first 52 bits of sha256(uid). */
export function wavePosition(uid: string): number {
  const hex = createHash("sha256").update(uid).digest("hex").slice(0, 13);
  return parseInt(hex, 16) / 2 ** 52;
}

/** When `r` may be taken by the Cluster at `position`. */
export function opensAt(r: ChannelRelease, follow: FollowSpec, position: number): Date {
  const wave = r.waveSeconds ?? follow.waveSeconds ?? 0;
  const delay = follow.delaySeconds ?? 0;
  return new Date(r.addedAt.getTime() + (delay + position * wave) * 1000);
}

export function decideFollow(i: FollowInput): FollowDecision {
  const recalls = recallsOf(i.releases);
  if (i.follow === undefined) return { ...pinnedVersion(i), recalls };
  const follow = i.follow;
  const releases = byVersion(i.releases);
  const current = releases.find((r) => r.version === i.current?.version);
  const recalled = current?.recalled === undefined ? undefined : current;
  // Never below the release taken, whether or not the channel still names it.
  const after = releases.filter((r) => !below(r, i.current));
  const candidates = after.filter((r) => r.recalled === undefined && !(i.skip?.(r) ?? false));
  const newest = candidates.at(-1);
  const position = wavePosition(i.uid);
  const open = candidates.filter((r) => opensAt(r, follow, position) <= i.now).at(-1);
  const target = open ?? (recalled === undefined ? current : undefined);
  const d: FollowDecision = { target, newest, recalls };
  if (newest !== undefined && newest !== target) d.waveOpensAt = opensAt(newest, follow, position);
  if (recalled?.recalled !== undefined && target === undefined) {
    d.recalled = { version: recalled.version, reason: recalled.recalled.reason };
    d.fault = recallFault(recalled);
  } else if (target === undefined && i.current !== undefined && current === undefined) {
    d.fault = goneFault(i.current.version);
  }
  return d;
}

function goneFault(version: string): FollowFault {
  return {
    reason: "NotInChannel",
    message: `the release this Cluster took, ${version}, is no longer in the signed channel's targets, and no newer release is open for this Cluster: no turn is granted, and following never moves the fleet below ${version}; publish a newer release (\`liken release channel add\`), or revert (\`liken rollout revert\`)`,
  };
}

function pinnedVersion(i: FollowInput): Omit<FollowDecision, "recalls"> {
  const newest = byVersion(i.releases)
    .filter((r) => r.recalled === undefined)
    .at(-1);
  if (i.version === undefined) return { target: undefined, newest };
  const r = i.releases.find((x) => x.version === i.version);
  if (r === undefined) {
    return {
      target: undefined,
      newest,
      fault: {
        reason: "NotInChannel",
        message: `the signed channel names no release ${i.version}; set spec.version to one it names (AVAILABLE shows the newest), or publish it with \`liken release channel add\``,
      },
    };
  }
  if (r.recalled !== undefined) {
    return {
      target: undefined,
      newest,
      recalled: { version: r.version, reason: r.recalled.reason },
      fault: recallFault(r),
    };
  }
  return { target: r, newest };
}

function recallFault(r: ChannelRelease): FollowFault {
  return {
    reason: "ReleaseRecalled",
    message: `the channel recalled ${r.version} (${r.recalled?.reason ?? "no reason given"}) at ${r.recalled?.at ?? "?"}: no turn is granted for it; machines that run it stay as they are until a newer release (or a revert) is the target`,
  };
}
