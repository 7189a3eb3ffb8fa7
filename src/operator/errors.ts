// The operator's error family.
import { LikenError, type LikenErrorOptions } from "../errors.js";

export type OperatorCode =
  | "LIKEN_OPERATOR_CLUSTER_WRITE"
  | "LIKEN_OPERATOR_NOT_FOUND"
  | "LIKEN_OPERATOR_NO_TURN"
  | "LIKEN_OPERATOR_NOT_STAGED"
  | "LIKEN_OPERATOR_USAGE";

export class OperatorError extends LikenError {
  declare readonly code: OperatorCode;
  constructor(code: OperatorCode, message: string, opts: LikenErrorOptions = {}) {
    super(code, message, opts);
  }
}
