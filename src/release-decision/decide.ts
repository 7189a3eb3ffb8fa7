// The release the fleet's machines may take now, pure: the one place that composes the spec
// or follow's choice, the channel's trust and its freshness, the channel's recalls, the
// Cluster's revocations, the revert in force and a person's unrevoke (docs/adr/
// one-release-decision.md). Grants (decide.ts through target/view.ts), follow (follow.ts) and
// revert (revert.ts) ask it; none of them decides a piece of it alone.
//
// The rules, in the order they are applied:
//   1. nothing chosen (spec.version unset, follow with nothing taken yet): no release;
//   2. a channel that does not vouch for the choice now (its metadata refused, or its trust
//      expired, acceptExpiredSeconds included, while it could not be reached): hold, whatever
//      else holds; a revert in force stays recorded and waits;
//   3. a revert in force for the chosen release: its target, unless the channel recalled it or
//      the Cluster revoked it since (then hold, naming both releases: revert.ts retargets it to
//      the newest proven release neither recalled nor revoked when there is one), or unless it
//      goes below the floor the release it leaves declares (release.yaml revertFloor), or that
//      floor is not known yet (judged when a revert is decided: `floor`);
//   4. a chosen release the Cluster revoked, or the channel recalled: hold;
//   5. a followed release older than the one taken: hold (only a person's revert goes down);
//   6. a followed release without the signed evidence spec...follow.requireEvidence asks for:
//      hold, naming what is missing (evidence.ts);
//   7. otherwise the chosen release.
// So the fleet never goes below the floor, nor below the release it took, unless a person
// reverts (`liken rollout revert`, or the threshold a person set in spec.rollout.revert), and
// never below the floor by a revert at all: only a person's spec.version goes there.
// A hold always names the releases, the rule and what a person can do (`message`).
import {
  sameRelease,
  type ReleaseRef,
  type RevertRecord,
  type RevokedRelease,
} from "../api/types.js";
import { compareVersions } from "./version-order.js";
import { evidenceHoldMessage, type EvidenceInput } from "./evidence.js";

/** A release the signed channel recalled. */
export interface Recall {
  version: string;
  digest?: string;
  reason?: string;
}

export interface TrustInput {
  /** The channel's metadata was refused (a TUF fault other than being unreachable). */
  refused?: { reason: string; message: string };
  /** The channel's verdict names the chosen release as the target (status.trust.target). */
  vouches: boolean;
  /** ChannelTrusted False: why it does not vouch (ReleaseRecalled, NotInChannel...). */
  verdict?: { reason: string; message: string };
  /** When the first of the trusted roles expires (status.trust.expiresAt). */
  expiresAt?: Date;
  acceptExpiredSeconds: number;
  /** ChannelReachable: whether the last read of the channel answered. */
  reachable: boolean;
  /** follow.requireEvidence and the target's signed evidence (unset: none is required). */
  evidence?: EvidenceInput;
}

/**
 * What the operator read of the revert floor of the release a revert leaves (its release.yaml
 * revertFloor, verified against the catalog digest: src/operator/channel/floor.ts).
 */
export type FloorRead =
  /** Read and verified; `floor` absent: the release declares none. */
  | { kind: "read"; floor?: string }
  /** Could not be read or did not verify: no revert until it can (the safe side). */
  | { kind: "unread"; message: string }
  /** Not read yet: the operator reads it, and the revert waits for it. */
  | { kind: "reading" };

export interface ReleaseInput {
  /** What spec.version (pinned: its catalog entry) or follow (status.trust) chose. */
  chosen: ReleaseRef | undefined;
  via: "spec" | "follow";
  /** Channel modes only: what the channel says of the choice now. */
  trust?: TrustInput;
  /** The newest release this Cluster took from the channel (status.trust.taken). */
  taken?: ReleaseRef;
  recalls: readonly Recall[];
  revoked: readonly RevokedRelease[];
  /** status.revert, after a person's unrevoke was applied (revert.ts withoutUnrevoked). */
  revert: RevertRecord | undefined;
  /** The operator's clock; undefined: do not judge expiry here (the agent's reading). */
  now?: Date;
  /**
   * The revert floor of `revert.from`, as read, when a revert is being decided (started or
   * retargeted). Absent: not judged here: the agent's reading, and a revert already recorded
   * (its floor was judged when it was decided; a digest names one release.yaml for ever).
   */
  floor?: FloorRead;
}

export const HOLD_RULES = [
  "TrustRefused",
  "TrustExpired",
  "RevertTargetWithdrawn",
  "RevertFloorUnread",
  "RevertBelowFloor",
  "Revoked",
  "Recalled",
  "NotVouched",
  "BelowTaken",
  "EvidenceShort",
] as const;
export type HoldRule = (typeof HOLD_RULES)[number];

export interface Hold {
  rule: HoldRule;
  /** The releases the hold is about (the chosen one first). */
  releases: ReleaseRef[];
  /** What holds, why, and what a person can do. */
  message: string;
}

export type ReleaseDecision =
  | { kind: "none" }
  /** Machines may take `release`; `revert` set: it is the target of a revert in force. */
  | { kind: "take"; chosen: ReleaseRef; release: ReleaseRef; revert?: RevertRecord }
  /** No machine takes anything new; `revert`: a revert in force waits (it is kept). */
  | {
      kind: "hold";
      chosen: ReleaseRef;
      hold: Hold;
      revert?: RevertRecord;
      revoked?: RevokedRelease;
    };

export function recallOf(
  recalls: readonly Recall[],
  r: ReleaseRef | undefined,
): Recall | undefined {
  if (r === undefined) return undefined;
  return recalls.find(
    (x) => x.version === r.version && (x.digest === undefined || x.digest === r.digest),
  );
}

export function revocationOf(
  revoked: readonly RevokedRelease[],
  r: ReleaseRef | undefined,
): RevokedRelease | undefined {
  return r === undefined ? undefined : revoked.find((x) => sameRelease(x, r));
}

/** Neither recalled by the channel nor revoked by the Cluster: a release a turn may go to. */
export function withdrawnWhy(
  i: Pick<ReleaseInput, "recalls" | "revoked">,
  r: ReleaseRef,
): string | undefined {
  const recall = recallOf(i.recalls, r);
  if (recall !== undefined) {
    return `the channel recalled ${r.version}${recall.reason ? ` (${recall.reason})` : ""}`;
  }
  const rev = revocationOf(i.revoked, r);
  if (rev !== undefined) return `this Cluster revoked ${r.version} (${rev.reason}, at ${rev.at})`;
  return undefined;
}

/** True when `r` is older than `floor` by version (the order of the VERSION column). */
export function below(r: ReleaseRef, floor: ReleaseRef | string | undefined): boolean {
  if (floor === undefined) return false;
  return compareVersions(r.version, typeof floor === "string" ? floor : floor.version) < 0;
}

/** Trust expired, acceptExpiredSeconds included, at `now`. */
export function trustExpired(t: TrustInput, now: Date | undefined): boolean {
  if (now === undefined || t.expiresAt === undefined) return false;
  return now.getTime() > t.expiresAt.getTime() + t.acceptExpiredSeconds * 1000;
}

export function decideRelease(i: ReleaseInput): ReleaseDecision {
  const chosen = i.chosen;
  if (chosen === undefined) return { kind: "none" };
  const revert =
    i.revert !== undefined && sameRelease(i.revert.from, chosen) ? i.revert : undefined;
  const hold = (h: Hold, extra: { revoked?: RevokedRelease } = {}): ReleaseDecision => ({
    kind: "hold",
    chosen,
    hold: h,
    ...(revert === undefined ? {} : { revert }),
    ...extra,
  });
  const trusted = trustHold(i, chosen, revert);
  if (trusted !== undefined) return hold(trusted);
  if (revert !== undefined) {
    const why = withdrawnWhy(i, revert.to);
    if (why === undefined) {
      const floored = floorHold(i.floor, revert);
      if (floored !== undefined) return hold(floored);
      return { kind: "take", chosen, release: revert.to, revert };
    }
    return hold({
      rule: "RevertTargetWithdrawn",
      releases: [chosen, revert.to],
      message:
        `the revert of ${chosen.version} goes to ${revert.to.version}, but ${why}: no turn is granted for either; ` +
        `the revert goes to the newest proven release neither recalled nor revoked once there is one ` +
        `(status.lastKnownGood, status.priorKnownGood). Set spec.version to a release you trust.`,
    });
  }
  const held = choiceHold(i, chosen);
  if (held !== undefined)
    return hold(held.hold, held.revoked === undefined ? {} : { revoked: held.revoked });
  return { kind: "take", chosen, release: chosen };
}

/** The rules on the chosen release itself when no revert is in force (4 and 5 above). */
function choiceHold(
  i: ReleaseInput,
  chosen: ReleaseRef,
): { hold: Hold; revoked?: RevokedRelease } | undefined {
  const revoked = revocationOf(i.revoked, chosen);
  if (revoked !== undefined) {
    return {
      hold: {
        rule: "Revoked",
        releases: [chosen],
        message:
          `${chosen.version} is revoked for this Cluster (${revoked.reason}, at ${revoked.at}): no turn is granted for it. ` +
          `Set spec.version to another release, or clear it with \`liken rollout unrevoke CLUSTER ${chosen.version}\`.`,
      },
      revoked,
    };
  }
  const recall = recallOf(i.recalls, chosen);
  if (recall !== undefined) {
    return {
      hold: {
        rule: "Recalled",
        releases: [chosen],
        message:
          `the channel recalled ${chosen.version}${recall.reason ? ` (${recall.reason})` : ""}: no turn is granted for it; ` +
          `machines that run it stay as they are until a newer release is the target, or a person reverts ` +
          `(\`liken rollout revert CLUSTER\`).`,
      },
    };
  }
  if (i.trust !== undefined && !i.trust.vouches) {
    const v = i.trust.verdict;
    return {
      hold: {
        rule: "NotVouched",
        releases: [chosen],
        message:
          `the signed channel does not vouch for ${chosen.version} now${v === undefined ? "" : ` (${v.reason}: ${v.message})`}: ` +
          `no turn is granted for it, and the fleet does not go below it; publish a newer release, or a person reverts (\`liken rollout revert CLUSTER\`).`,
      },
    };
  }
  if (i.via === "follow" && i.taken !== undefined && below(chosen, i.taken)) {
    return {
      hold: {
        rule: "BelowTaken",
        releases: [chosen, i.taken],
        // Not `liken rollout revert`: a revert leaves the chosen release, and here that is the
        // older one the fleet does not run (issue 48, defect 6). A person goes down by a pin.
        message:
          `following would move the fleet from ${i.taken.version} down to ${chosen.version}: a follower never goes ` +
          `below the release it took. To move on, publish a release newer than ${i.taken.version} ` +
          `(\`liken release channel add\`); to go down to ${chosen.version}, a person pins it: remove ` +
          `spec.releases.trust.follow and set spec.version to ${chosen.version} (kubectl edit cluster CLUSTER).`,
      },
    };
  }
  const short = i.via === "follow" ? evidenceHoldMessage(chosen, i.trust?.evidence) : undefined;
  if (short !== undefined)
    return { hold: { rule: "EvidenceShort", releases: [chosen], message: short } };
  return undefined;
}

/** Rule 3's floor: a revert never goes below what the release it leaves declares. */
function floorHold(floor: FloorRead | undefined, r: RevertRecord): Hold | undefined {
  if (floor === undefined) return undefined;
  const { from, to } = r;
  const releases = [from, to];
  switch (floor.kind) {
    case "reading":
      return {
        rule: "RevertFloorUnread",
        releases,
        message: `reading the revert floor of ${from.version} (its release.yaml) before reverting to ${to.version}`,
      };
    case "unread":
      return {
        rule: "RevertFloorUnread",
        releases,
        message:
          `the revert floor of ${from.version} could not be read (${floor.message}), so it is not known ` +
          `whether ${to.version} is allowed: nothing is reverted until it can be read. ` +
          `Check spec.releases.source, or set spec.version to a release you trust.`,
      };
    case "read":
      if (floor.floor === undefined || !below(to, floor.floor)) return undefined;
      return {
        rule: "RevertBelowFloor",
        releases,
        message:
          `${from.version} declares revertFloor ${floor.floor} in its release.yaml (a machine that ran ` +
          `it cannot go back below that, e.g. a data format it migrated) and the last known good ` +
          `${to.version} is older: nothing is reverted. Roll forward to a fixed release at or above ` +
          `${floor.floor} (kubectl edit cluster CLUSTER).`,
      };
    default: {
      const never: never = floor;
      throw new Error(`unknown floor read ${JSON.stringify(never)}`);
    }
  }
}

function trustHold(
  i: ReleaseInput,
  chosen: ReleaseRef,
  revert: RevertRecord | undefined,
): Hold | undefined {
  const t = i.trust;
  if (t === undefined) return undefined;
  const waits =
    revert === undefined
      ? ""
      : `; the revert of ${chosen.version} to ${revert.to.version} waits for it`;
  const releases = revert === undefined ? [chosen] : [chosen, revert.to];
  if (t.refused !== undefined) {
    return {
      rule: "TrustRefused",
      releases,
      message: `the signed channel's metadata was refused (${t.refused.reason}: ${t.refused.message}): nothing it names is trusted and no turn is granted${waits}; ChannelTrusted says what to do`,
    };
  }
  if (!t.reachable && trustExpired(t, i.now)) {
    const until = new Date(t.expiresAt!.getTime() + t.acceptExpiredSeconds * 1000);
    return {
      rule: "TrustExpired",
      releases,
      message:
        `the channel's trust expired at ${iso(t.expiresAt!)}` +
        (t.acceptExpiredSeconds > 0
          ? ` (accepted until ${iso(until)}, acceptExpiredSeconds ${t.acceptExpiredSeconds})`
          : "") +
        ` while the channel was unreachable: what it vouched for (${chosen.version}) is no longer trusted and no new turn is granted${waits}. ` +
        `Make the channel reachable (spec.releases.source) and have its publisher refresh it (\`liken release channel refresh\`)`,
    };
  }
  return undefined;
}

const iso = (d: Date): string => d.toISOString().replace(/\.\d{3}Z$/, "Z");
