// The slots module's error family.
import { LikenError, type LikenErrorOptions } from "../errors.js";

export type SlotCode =
  | "LIKEN_SLOT_CONFIG_INVALID"
  | "LIKEN_SLOT_RUNNING_UNKNOWN"
  | "LIKEN_SLOT_TOO_SMALL"
  | "LIKEN_SLOT_NOT_STAGED"
  | "LIKEN_SLOT_VERIFY_FAILED"
  | "LIKEN_SLOT_WRITE_FAILED"
  | "LIKEN_SLOT_BUSY"
  | "LIKEN_SLOT_PEER_RATE_TOO_LOW"
  | "LIKEN_SLOT_INDEX_FAILED";

export class SlotError extends LikenError {
  declare readonly code: SlotCode;
  constructor(code: SlotCode, message: string, opts: LikenErrorOptions = {}) {
    super(code, message, opts);
  }
}
