// `liken promote`'s error family: each refusal names the context, cluster or policy field that is
// wrong and what to do; nothing is signed when one is thrown.
import { LikenError, type LikenErrorOptions } from "../errors.js";

export type PromoteCode =
  /** The policy file or flags are not a policy (zod's words, with the key path). */
  | "LIKEN_PROMOTE_POLICY_INVALID"
  /** A policy no ring of these contexts can ever meet (more clusters than contexts...). */
  | "LIKEN_PROMOTE_POLICY_UNMEETABLE"
  /** A context that is not in the kubeconfig, or whose API server did not answer. */
  | "LIKEN_PROMOTE_CONTEXT_UNREACHABLE"
  /** A context whose credentials may write Clusters: promote reads with read-only ones. */
  | "LIKEN_PROMOTE_CONTEXT_CAN_WRITE"
  /** A context that holds no Cluster (or not the one named). */
  | "LIKEN_PROMOTE_NO_CLUSTER"
  /** A Cluster that does not follow the source channel (another channel or another root). */
  | "LIKEN_PROMOTE_WRONG_CHANNEL"
  /** A Cluster whose evidence is about another digest under the same version. */
  | "LIKEN_PROMOTE_OTHER_DIGEST"
  /** The release is not (or no longer) in the source channel, or was recalled there. */
  | "LIKEN_PROMOTE_NOT_IN_SOURCE"
  /** The evidence falls short of the policy: which cluster lacks what. */
  | "LIKEN_PROMOTE_EVIDENCE_SHORT";

export class PromoteError extends LikenError {
  declare readonly code: PromoteCode;
  constructor(code: PromoteCode, message: string, opts: LikenErrorOptions = {}) {
    super(code, message, opts);
  }
}
