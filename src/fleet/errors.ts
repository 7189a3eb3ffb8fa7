// The error family of the commands that act over many kubeconfig contexts (docs/fleet.md).
import { LikenError, type LikenErrorOptions } from "../errors.js";

export type FleetCode =
  /** --contexts names a context the kubeconfig does not have, or the kubeconfig has none. */
  | "LIKEN_FLEET_NO_CONTEXT"
  /** A flag of a fleet command was given a value it cannot use (a timeout, an output). */
  | "LIKEN_FLEET_USAGE"
  /** `liken rollout pause|resume --contexts`: at least one context was not reached or refused. */
  | "LIKEN_FLEET_NOT_ALL_REACHED";

export class FleetError extends LikenError {
  declare readonly code: FleetCode;
  constructor(code: FleetCode, message: string, opts: LikenErrorOptions = {}) {
    super(code, message, opts);
  }
}
