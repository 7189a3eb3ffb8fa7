// The verify module's error family: every refusal of a release document, a channel or an
// artifact byte carries one of these stable codes.
import { LikenError, type LikenErrorOptions } from "../errors.js";

export type VerifyCode =
  | "LIKEN_VERIFY_DOCUMENT_TOO_LARGE"
  | "LIKEN_VERIFY_DOCUMENT_INVALID"
  | "LIKEN_VERIFY_DIGEST_MISMATCH"
  | "LIKEN_VERIFY_VERSION_MISMATCH"
  | "LIKEN_VERIFY_PATH_UNSAFE"
  | "LIKEN_VERIFY_SIZE_MISMATCH"
  | "LIKEN_VERIFY_SLOT_TOO_SMALL"
  | "LIKEN_VERIFY_HTTP_STATUS"
  | "LIKEN_VERIFY_REDIRECT_REFUSED"
  | "LIKEN_VERIFY_STALLED"
  | "LIKEN_VERIFY_CONNECTION"
  | "LIKEN_VERIFY_BEYOND_SIZE"
  | "LIKEN_VERIFY_ARTIFACT_MISMATCH"
  | "LIKEN_VERIFY_INDEX_INVALID"
  | "LIKEN_VERIFY_PAGE_MISMATCH"
  | "LIKEN_VERIFY_FRAME_INVALID"
  /** A 200 with the whole file to a Range request: adaptive downloads need 206 (docs/day-1.md). */
  | "LIKEN_VERIFY_RANGE_IGNORED";

export class VerifyError extends LikenError {
  declare readonly code: VerifyCode;
  constructor(code: VerifyCode, message: string, opts: LikenErrorOptions = {}) {
    super(code, message, opts);
  }
}
