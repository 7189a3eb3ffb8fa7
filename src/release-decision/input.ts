// What the release decision (decide.ts) reads of a Cluster: the spec's or follow's choice as
// the operator recorded it, the channel's trust and freshness (status.trust and the
// ChannelReachable / ChannelTrusted conditions), the recalls it knows, the revocations and the
// revert in force. The agent reads the same (target/view.ts), without a clock: expiry is the
// operator's to judge, and it takes status.trust.target away when it does.
import { sameRelease, type Cluster, type ReleaseRef } from "../api/types.js";
import { recallOf, type Recall, type ReleaseInput, type TrustInput } from "./decide.js";

/** ChannelTrusted reasons of a verified channel that withholds the choice (not a refusal). */
const VERDICTS: ReadonlySet<string> = new Set([
  "ReleaseRecalled",
  "NotInChannel",
  "MetadataVerified",
]);

function catalogEntry(c: Cluster, version: string | undefined): ReleaseRef | undefined {
  if (version === undefined) return undefined;
  const e = c.spec.releases.catalog?.find((x) => x.version === version);
  return e === undefined ? undefined : { version: e.version, digest: e.digest };
}

/**
 * What the signed channel chose for this Cluster: the target it vouches for now, or, when a
 * recall, a refusal or a removal took that away, the release the Cluster took (it stays the
 * release a revert leaves, and the one the fleet never goes below). Only on a trust status
 * made from the spec's pinned root; with spec.version, only the release it names.
 */
export function channelChoice(c: Cluster): ReleaseRef | undefined {
  const spec = c.spec.releases.trust;
  const st = c.status?.trust;
  if (spec === undefined || st === undefined || st.rootDigest !== spec.rootDigest) return undefined;
  const r = st.target ?? st.taken ?? revertedRecall(c);
  if (r === undefined) return undefined;
  if (spec.follow === undefined && r.version !== c.spec.version) return undefined;
  return { version: r.version, digest: r.digest };
}

/**
 * A Cluster whose trust status began after the channel recalled the release its machines run
 * took nothing; the operator then starts a revert from what the Machines run
 * (src/operator/revert/running.ts). That recalled release is what the revert leaves, so it is
 * the choice while nothing else is: without it the revert would never be in force (issue 48,
 * defect 7). Only a release the channel recalled: no other record stands in for a choice.
 */
function revertedRecall(c: Cluster): ReleaseRef | undefined {
  const from = c.status?.revert?.from;
  return recallOf(recallsOf(c), from) === undefined ? undefined : from;
}

/** The choice of spec.version or follow, in the Cluster's trust mode, before any rule. */
export function chosenOf(c: Cluster): ReleaseRef | undefined {
  const mode = c.spec.releases.trust?.mode ?? "pinned";
  if (mode === "pinned") return catalogEntry(c, c.spec.version);
  const t = channelChoice(c);
  if (mode === "channel") return t;
  // channel+pinned: both parties must agree.
  const pinned = catalogEntry(c, t?.version);
  return t !== undefined && pinned?.digest === t.digest ? pinned : undefined;
}

/** How a False ChannelTrusted reads: a verdict on the choice, a blip, or refused metadata. */
function refusalOf(
  c: { reason: string; message: string },
  target: ReleaseRef | undefined,
): Pick<TrustInput, "refused" | "verdict"> {
  const reason = c.reason;
  const v = { reason, message: c.message };
  // Unreachable keeps what was verified (until it expires); a verified channel that withholds
  // the choice is a verdict; anything else refused the metadata.
  if (VERDICTS.has(reason)) return { verdict: v };
  if (reason === "ChannelUnreachable" && target !== undefined) return {};
  return { refused: v };
}

const vouches = (t: ReleaseRef | undefined, chosen: ReleaseRef | undefined): boolean =>
  chosen !== undefined && t !== undefined && sameRelease(t, chosen);

function trustOf(c: Cluster, chosen: ReleaseRef | undefined): TrustInput | undefined {
  if ((c.spec.releases.trust?.mode ?? "pinned") === "pinned") return undefined;
  const st = c.status?.trust ?? { mode: "channel" };
  const conds = c.status?.conditions ?? [];
  const trusted = conds.find((x) => x.type === "ChannelTrusted");
  const reach = conds.find((x) => x.type === "ChannelReachable");
  const target = st.target;
  const refusal = trusted?.status === "False" ? refusalOf(trusted, target) : {};
  return {
    vouches: vouches(target, chosen),
    acceptExpiredSeconds: c.spec.releases.trust?.acceptExpiredSeconds ?? 0,
    reachable: reach?.status !== "False",
    ...(st.expiresAt === undefined ? {} : { expiresAt: new Date(st.expiresAt) }),
    ...evidenceOf(c),
    ...refusal,
  };
}

/** follow.requireEvidence and the signed evidence of the target it applies to (evidence.ts). */
function evidenceOf(c: Cluster): Pick<TrustInput, "evidence"> {
  const require = c.spec.releases.trust?.follow?.requireEvidence;
  if (require === undefined) return {};
  return { evidence: { require, signed: c.status?.trust?.evidence } };
}

function recallsOf(c: Cluster): Recall[] {
  const t = c.status?.trust;
  return [...(t?.recalls ?? []), ...(t?.recalled === undefined ? [] : [t.recalled])];
}

function takenOf(c: Cluster): ReleaseRef | undefined {
  const t = c.status?.trust;
  return t?.rootDigest === c.spec.releases.trust?.rootDigest ? t?.taken : undefined;
}

/** The decision's input, read from the Cluster (`now`: the operator's clock; none for agents). */
export function releaseInputOf(c: Cluster, now?: Date): ReleaseInput {
  const chosen = chosenOf(c);
  const trust = trustOf(c, chosen);
  const taken = takenOf(c);
  return {
    chosen,
    via: c.spec.releases.trust?.follow !== undefined && trust !== undefined ? "follow" : "spec",
    recalls: recallsOf(c),
    revoked: c.status?.revokedReleases ?? [],
    revert: c.status?.revert,
    ...(trust === undefined ? {} : { trust }),
    ...(taken === undefined ? {} : { taken }),
    ...(now === undefined ? {} : { now }),
  };
}
