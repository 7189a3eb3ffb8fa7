// The drain's error family (docs/style.md, "Errors carry a stable code and their context").
import { LikenError, type LikenErrorOptions } from "../errors.js";

export type DrainErrorCode =
  /** The drain did not finish in time; the node stays cordoned; context names the blockers. */
  | "LIKEN_DRAIN_DEADLINE"
  /** The caller aborted the drain; the node stays cordoned. */
  | "LIKEN_DRAIN_ABORTED"
  /** The caller stopped a drain it no longer needs; liken's cordon is undone (not a failure). */
  | "LIKEN_DRAIN_STOPPED"
  | "LIKEN_DRAIN_NODE_NOT_FOUND"
  /** The API server refused an eviction for a reason no retry fixes (403, 422, ...). */
  | "LIKEN_DRAIN_EVICTION_REFUSED"
  /** Any other failed call to the API server. */
  | "LIKEN_DRAIN_API";

export class DrainError extends LikenError {
  declare readonly code: DrainErrorCode;

  constructor(code: DrainErrorCode, message: string, opts: LikenErrorOptions = {}) {
    super(code, message, opts);
  }
}
