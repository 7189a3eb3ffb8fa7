// Whether a release carries enough signed evidence for a Cluster that requires it
// (spec.releases.trust.follow.requireEvidence), pure: the release decision (decide.ts) holds a
// followed release that falls short, and its message says what is missing. The evidence is the
// target's signed custom metadata, summed by the operator when it verified the channel
// (status.trust.evidence, src/verify/evidence.ts); no clock is read: the soak is the one signed.
import type { ReleaseRef, RequireEvidence, SignedEvidenceSummary } from "../api/types.js";

export interface EvidenceInput {
  require: RequireEvidence;
  /** The target's signed evidence, summed; undefined: it carries none. */
  signed: SignedEvidenceSummary | undefined;
}

export interface Shortfall {
  field: "clusters" | "machines" | "soakSeconds";
  need: number;
  have: number;
}

const FIELDS = ["clusters", "machines", "soakSeconds"] as const;

/** Whether anything is required at all (every field unset or 0: no). */
export function requiresEvidence(r: RequireEvidence | undefined): boolean {
  return r !== undefined && FIELDS.some((f) => (r[f] ?? 0) > 0);
}

/** What the signed evidence lacks against what is required; empty: enough. */
export function shortfalls(i: EvidenceInput): Shortfall[] {
  const out: Shortfall[] = [];
  for (const field of FIELDS) {
    const need = i.require[field] ?? 0;
    if (need <= 0) continue;
    const have = i.signed?.[field] ?? 0;
    if (have < need) out.push({ field, need, have });
  }
  return out;
}

const WORDS: Readonly<Record<Shortfall["field"], string>> = {
  clusters: "cluster(s)",
  machines: "machine(s) proven",
  soakSeconds: "s of soak without a revert",
};

/** "2 cluster(s) (has 1), 3600 s of soak without a revert (has 600)". */
export function shortfallText(s: readonly Shortfall[]): string {
  return s.map((x) => `${x.need} ${WORDS[x.field]} (has ${x.have})`).join(", ");
}

/** The hold's message, or undefined when the evidence is enough (or none is required). */
export function evidenceHoldMessage(
  chosen: ReleaseRef,
  i: EvidenceInput | undefined,
): string | undefined {
  if (i === undefined || !requiresEvidence(i.require)) return undefined;
  const s = shortfalls(i);
  if (s.length === 0) return undefined;
  const signed =
    i.signed === undefined
      ? "carries no signed evidence"
      : `carries signed evidence from channel ${i.signed.from} (promoted ${i.signed.promotedAt})`;
  return (
    `${chosen.version} ${signed}, and spec.releases.trust.follow.requireEvidence asks for ` +
    `${shortfallText(s)}: it is not followed; the machines stay where they are until the ring before ` +
    "proves it and `liken promote` signs it again with more evidence (docs/rings.md)"
  );
}
