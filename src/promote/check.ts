// Whether the evidence read from a ring meets the policy, pure: the signed evidence to put in
// the target when it does; otherwise every problem, each naming the context and Cluster and what
// it lacks. Two kinds of problem: a read that is not evidence about this release at all (a
// Cluster following another channel or root, evidence about another digest under the same
// version) refuses the promotion whatever the rest shows; evidence that is about it but short
// says which cluster lacks what. Counts are over distinct Clusters, not contexts (distinct.ts);
// a soak ends when the Cluster's operator last wrote its status (watched.ts).
import { sameRelease, type ReleaseEvidence } from "../api/types.js";
import { soakSecondsOf } from "../operator/status/evidence.js";
import { rfc3339 } from "../api/time.js";
import type { ClusterEvidence, SignedEvidence } from "../verify/evidence.js";
import { distinctClusters } from "./distinct.js";
import type { PromoteCode } from "./errors.js";
import type { Policy } from "./policy.js";
import type { ClusterRead } from "./read.js";
import { watchedUntil } from "./watched.js";

/** The release as the source channel names it, and the channel's pin. */
export interface SourceRelease {
  channel: string;
  rootDigest: string;
  version: string;
  digest: string;
}

export interface CheckInput {
  source: SourceRelease;
  reads: readonly ClusterRead[];
  policy: Policy;
  now: Date;
}

export type CheckResult =
  /**
   * notes: what clusters that were not counted lack (they did not block); same: each Cluster
   * read through more than one context, counted once (distinct.ts).
   */
  | { ok: true; evidence: SignedEvidence; notes: string[]; same: string[] }
  | { ok: false; code: PromoteCode; problems: string[] };

const who = (r: ClusterRead): string => `context ${r.context}, Cluster ${r.cluster.metadata.name}`;

/** A read that is not evidence about this release of this channel at all. */
function refusalOf(
  r: ClusterRead,
  s: SourceRelease,
): { code: PromoteCode; text: string } | undefined {
  const t = r.cluster.spec.releases.trust;
  if (t?.channel !== s.channel || t.rootDigest !== s.rootDigest || t.mode === undefined) {
    const follows =
      t?.channel === undefined
        ? "follows no signed channel"
        : `follows channel ${t.channel} (root ${t.rootDigest ?? "?"})`;
    return {
      code: "LIKEN_PROMOTE_WRONG_CHANNEL",
      text: `${who(r)} ${follows}, not the source channel ${s.channel} (root ${s.rootDigest}): its evidence is not about this ring; leave it out, or promote from the channel it follows`,
    };
  }
  const other = (r.cluster.status?.evidence ?? []).find(
    (e) => e.version === s.version && e.digest !== s.digest,
  );
  if (other !== undefined) {
    return {
      code: "LIKEN_PROMOTE_OTHER_DIGEST",
      text: `${who(r)} shows evidence about ${s.version} with digest ${other.digest}, but channel ${s.channel} names ${s.version} as ${s.digest}: a version names one build; find out which build that cluster ran before promoting either`,
    };
  }
  return undefined;
}

/** What one cluster lacks to count, or its evidence line when it counts. */
function clusterOf(
  r: ClusterRead,
  i: CheckInput,
): { lacks: string; veto?: true } | { evidence: ClusterEvidence; entry: ReleaseEvidence } {
  const v = i.source.version;
  const e = (r.cluster.status?.evidence ?? []).find((x) => sameRelease(x, i.source));
  if (e === undefined || e.provenMachines === 0 || e.firstProvenAt === undefined)
    return { lacks: `${who(r)} has no machine that proved ${v}` };
  // A revert or a recall anywhere in the ring vetoes the promotion, whatever the rest shows.
  if (e.revertedAt !== undefined)
    return { lacks: `${who(r)} reverted ${v} at ${e.revertedAt}`, veto: true };
  if (e.recalledAt !== undefined)
    return { lacks: `${who(r)} saw ${v} recalled at ${e.recalledAt}`, veto: true };
  const watched = watchedUntil(r);
  const soak = soakSecondsOf(e, watched.until);
  if (soak < i.policy.soakSeconds) {
    const stopped =
      watched.lastLooked === undefined
        ? ""
        : `; its operator last wrote its status at ${watched.lastLooked}: a soak nobody watched is not counted`;
    return {
      lacks: `${who(r)} ran ${v} ${soak} s without a revert, the policy asks ${i.policy.soakSeconds} s (since ${e.firstProvenAt}${stopped})`,
    };
  }
  return {
    entry: e,
    evidence: {
      context: r.context,
      server: r.server,
      cluster: r.cluster.metadata.name,
      uid: r.cluster.metadata.uid ?? "",
      channel: i.source.channel,
      machines: e.provenMachines,
      failedTrials: e.failedTrials,
      firstProvenAt: e.firstProvenAt,
      lastProvenAt: e.lastProvenAt ?? e.firstProvenAt,
      soakSeconds: soak,
      readAt: rfc3339(r.readAt),
    },
  };
}

function failuresOf(i: CheckInput): { total: number; where: string[] } {
  let total = 0;
  const where: string[] = [];
  for (const r of i.reads) {
    const e = (r.cluster.status?.evidence ?? []).find((x) => sameRelease(x, i.source));
    if (e === undefined || e.failedTrials === 0) continue;
    total += e.failedTrials;
    where.push(`${who(r)}: ${e.failedTrials}`);
  }
  return { total, where };
}

export function checkEvidence(given: CheckInput): CheckResult {
  // Everything below counts clusters, machines and failed trials: over distinct Clusters only.
  const distinct = distinctClusters(given.reads);
  const i: CheckInput = { ...given, reads: distinct.reads };
  const refusals = i.reads.flatMap((r) => refusalOf(r, i.source) ?? []);
  if (refusals.length > 0)
    return { ok: false, code: refusals[0]!.code, problems: refusals.map((x) => x.text) };
  const per = i.reads.map((r) => clusterOf(r, i));
  const counted = per.flatMap((x) => ("evidence" in x ? [x.evidence] : []));
  const problems = per.flatMap((x) => ("lacks" in x ? [x.lacks] : []));
  const p = i.policy;
  const failures = failuresOf(i);
  const machines = counted.reduce((n, c) => n + c.machines, 0);
  const short = [
    ...(failures.total > p.failedTrials
      ? [
          `${failures.total} failed trial(s) of ${i.source.version} in the ring (${failures.where.join("; ")}), the policy allows ${p.failedTrials}`,
        ]
      : []),
    ...(counted.length < p.clusters
      ? [`${counted.length} cluster(s) count, the policy asks ${p.clusters}`]
      : []),
    ...(machines < p.machines
      ? [
          `${machines} machine(s) proved it over the counted clusters, the policy asks ${p.machines}`,
        ]
      : []),
  ];
  // A cluster that merely lags does not block the others; a veto or a total short does, and
  // then every cluster's lack is told.
  const vetoed = per.some((x) => "veto" in x);
  if (vetoed || short.length > 0)
    return {
      ok: false,
      code: "LIKEN_PROMOTE_EVIDENCE_SHORT",
      // The same-Cluster lines first: they explain a count lower than the contexts given.
      problems: [...distinct.same, ...problems, ...short],
    };
  return {
    ok: true,
    notes: problems,
    same: distinct.same,
    evidence: {
      from: i.source.channel,
      version: i.source.version,
      digest: i.source.digest,
      promotedAt: rfc3339(i.now),
      policy: { ...p },
      clusters: counted,
    },
  };
}
