import { LikenError, type LikenErrorOptions } from "../errors.js";

/** Failures of the local control plane tooling (`npm run cluster`, test fixture, lab). */
export class ControlPlaneError extends LikenError {
  constructor(code: `LIKEN_CLUSTER_${string}`, message: string, opts?: LikenErrorOptions) {
    super(code, message, opts);
  }
}
