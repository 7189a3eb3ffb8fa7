// The evidence `liken promote` signs into a target's custom metadata (custom.liken.evidence):
// which clusters of the ring before proved the release, what each showed, and when it was read.
// It is part of targets.json, so it is as signed as the digest: a mirror that changes it breaks
// the targets role's signatures (or the snapshot's hash of targets.json) and the channel is
// refused whole, like any bad metadata (docs/adr/signed-evidence.md). Both the signing side
// (src/promote) and the client (tuf-target.ts) use this one declaration.
import * as z from "zod";
import type { SignedEvidenceSummary } from "../api/types.js";

const count = z.number().int().min(0);
const time = z.string().refine((s) => !Number.isNaN(Date.parse(s)), "must be an RFC 3339 time");

/** What one cluster of the ring showed, read through one kubeconfig context. */
export const clusterEvidenceSchema = z.object({
  /** The kubeconfig context it was read through, and that context's API server. */
  context: z.string().min(1),
  server: z.string().min(1),
  /** The Cluster object, by name and UID (a UID names one object, never a recreated one). */
  cluster: z.string().min(1),
  uid: z.string(),
  /** The channel the Cluster follows (spec.releases.trust.channel): the source channel. */
  channel: z.string().min(1),
  machines: count,
  failedTrials: count,
  firstProvenAt: time,
  lastProvenAt: time,
  /** How long it ran the release without a revert when read, in seconds. */
  soakSeconds: count,
  readAt: time,
});
export type ClusterEvidence = z.infer<typeof clusterEvidenceSchema>;

export const signedEvidenceSchema = z.object({
  /** The channel the release was promoted from. */
  from: z.string().min(1),
  version: z.string().min(1),
  digest: z.string().regex(/^sha256:[0-9a-f]{64}$/),
  promotedAt: time,
  /** The policy it met (src/promote/policy.ts). */
  policy: z.object({
    clusters: count,
    machines: count,
    failedTrials: count,
    soakSeconds: count,
  }),
  clusters: z.array(clusterEvidenceSchema).min(1).max(1000),
});
export type SignedEvidence = z.infer<typeof signedEvidenceSchema>;

/**
 * The signed evidence of a target as its custom field holds it, if it is well formed and about
 * this very release (version and digest); anything else counts as no evidence.
 */
export function evidenceOf(
  raw: unknown,
  release: { version: string; digest: string },
): SignedEvidence | undefined {
  const r = signedEvidenceSchema.safeParse(raw);
  if (!r.success) return undefined;
  if (r.data.version !== release.version || r.data.digest !== release.digest) return undefined;
  return r.data;
}

/**
 * Each Cluster once, by the rule `liken promote` counts them by (src/promote/distinct.ts): its
 * uid, else its server and name; of several entries for one, the latest read (its evidence only
 * grows). The signer never writes one Cluster twice, but a document that does, signed by an
 * older or another tool, must not meet a requireEvidence of N clusters with fewer than N, nor
 * add one Cluster's machines again.
 */
export function distinctClusters(clusters: readonly ClusterEvidence[]): ClusterEvidence[] {
  const byKey = new Map<string, ClusterEvidence>();
  for (const c of clusters) {
    const key = c.uid === "" ? `server ${c.server} name ${c.cluster}` : `uid ${c.uid}`;
    const had = byKey.get(key);
    if (had === undefined || Date.parse(c.readAt) > Date.parse(had.readAt)) byKey.set(key, c);
  }
  return [...byKey.values()];
}

/** The evidence summed as requireEvidence reads it (status.trust.evidence). */
export function summaryOf(e: SignedEvidence): SignedEvidenceSummary {
  const clusters = distinctClusters(e.clusters);
  return {
    from: e.from,
    clusters: clusters.length,
    machines: clusters.reduce((n, c) => n + c.machines, 0),
    failedTrials: clusters.reduce((n, c) => n + c.failedTrials, 0),
    soakSeconds: Math.min(...clusters.map((c) => c.soakSeconds)),
    promotedAt: e.promotedAt,
  };
}
