// The operator's error family.
import { LikenError, type LikenErrorOptions } from "../errors.js";

export type OperatorCode =
  | "LIKEN_OPERATOR_CLUSTER_WRITE"
  | "LIKEN_OPERATOR_NOT_FOUND"
  | "LIKEN_OPERATOR_NO_TURN"
  | "LIKEN_OPERATOR_NOT_STAGED"
  | "LIKEN_OPERATOR_USAGE"
  /** `liken rollout revert` while a revert of spec.version's release is in force. */
  | "LIKEN_OPERATOR_ALREADY_REVERTING"
  /** `liken rollout revert` with no known good release other than the one to leave. */
  | "LIKEN_OPERATOR_NO_KNOWN_GOOD"
  /**
   * `liken rollout revert` of a release held by a rule a revert does not lift (its trust, its
   * evidence, a follower's floor, a revocation): the hold names what does.
   */
  | "LIKEN_OPERATOR_REVERT_NOT_APPLICABLE"
  /** `liken rollout unrevoke` of a release that is not revoked. */
  | "LIKEN_OPERATOR_NOT_REVOKED";

export class OperatorError extends LikenError {
  declare readonly code: OperatorCode;
  constructor(code: OperatorCode, message: string, opts: LikenErrorOptions = {}) {
    super(code, message, opts);
  }
}
