import { LikenError, type LikenErrorOptions } from "../errors.js";

/** Failures of `npm run image` (the operator image build). */
export class ImageError extends LikenError {
  constructor(code: `LIKEN_IMAGE_${string}`, message: string, opts?: LikenErrorOptions) {
    super(code, message, opts);
  }
}
