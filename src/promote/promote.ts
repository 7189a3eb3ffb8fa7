// `liken promote`: read the evidence of one ring through its kubeconfig contexts, check it
// against the policy, and sign the release into the next channel with that evidence in the
// target's custom metadata. Anything short or wrong: a PromoteError naming each context,
// Cluster or field, and nothing signed.
import type { KubeConfig } from "@kubernetes/client-node";
import { promoteRelease, type SignOptions } from "../release/tuf.js";
import type { SignedEvidence } from "../verify/evidence.js";
import { checkEvidence } from "./check.js";
import { PromoteError } from "./errors.js";
import { unmeetable, type Policy } from "./policy.js";
import { readContext, type ClusterRead, type ContextRef } from "./read.js";
import { sourceRelease } from "./source.js";

export interface PromoteRun extends SignOptions {
  from: string;
  to: string;
  /** Unset: the newest release of `from` that `to` does not name yet. */
  version?: string;
  contexts: readonly ContextRef[];
  kubeConfig: KubeConfig;
  policy: Policy;
  /** Check and tell, sign nothing. */
  dryRun?: boolean;
}

export interface PromoteOutcome {
  version: string;
  digest: string;
  evidence: SignedEvidence;
  /** Lines that lacked but did not block (a lagging cluster while enough others count). */
  notes: string[];
  /** Each Cluster read through more than one context: which contexts; it counted once. */
  same: string[];
  signed: boolean;
}

/** Reads every context; a context that cannot be reached or can write refuses the run. */
async function readAll(kc: KubeConfig, refs: readonly ContextRef[]): Promise<ClusterRead[]> {
  const settled = await Promise.allSettled(refs.map((r) => readContext(kc, r)));
  const failed = settled.flatMap((s) => (s.status === "rejected" ? [s.reason as unknown] : []));
  if (failed.length > 0) {
    const first = failed.find((e) => e instanceof PromoteError);
    if (first === undefined) throw failed[0];
    throw new PromoteError(
      first.code,
      `${failed.map((e) => (e instanceof Error ? e.message : String(e))).join("\n  ")}\nnothing was signed`,
      { context: { contexts: refs.map((r) => r.context) } },
    );
  }
  return settled.flatMap((s) => (s.status === "fulfilled" ? [s.value] : []));
}

export async function promote(o: PromoteRun): Promise<PromoteOutcome> {
  const never = unmeetable(o.policy, o.contexts.length);
  if (never !== undefined)
    throw new PromoteError(
      "LIKEN_PROMOTE_POLICY_UNMEETABLE",
      `the policy can never be met: ${never}`,
      {
        context: { policy: o.policy, contexts: o.contexts.length },
      },
    );
  const source = await sourceRelease(o.repo, o.from, o.to, o.version);
  const reads = await readAll(o.kubeConfig, o.contexts);
  const now = o.now ?? new Date();
  const verdict = checkEvidence({ source, reads, policy: o.policy, now });
  if (!verdict.ok) {
    throw new PromoteError(
      verdict.code,
      `${source.version} (${source.digest}) is not promoted from ${o.from} to ${o.to}:\n  ${verdict.problems.join("\n  ")}\nnothing was signed`,
      { context: { version: source.version, problems: verdict.problems } },
    );
  }
  if (o.dryRun !== true)
    await promoteRelease({ ...o, version: source.version, evidence: verdict.evidence });
  return {
    version: source.version,
    digest: source.digest,
    evidence: verdict.evidence,
    notes: verdict.notes,
    same: verdict.same,
    signed: o.dryRun !== true,
  };
}
