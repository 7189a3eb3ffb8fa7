// The bootloader module's error family. Codes are stable (LIKEN_BOOTLOADER_<WHAT>); messages
// name the backend, the file and what to do next, because a person reads them on a machine that
// may be one reboot away from trouble.
import { LikenError, type LikenErrorOptions } from "../errors.js";

export type BootloaderErrorCode =
  | "LIKEN_BOOTLOADER_ENV_CORRUPT"
  | "LIKEN_BOOTLOADER_ENV_NO_SPACE"
  | "LIKEN_BOOTLOADER_ENV_BAD_NAME"
  | "LIKEN_BOOTLOADER_BOTH_COPIES_INVALID"
  | "LIKEN_BOOTLOADER_BAD_SLOT"
  | "LIKEN_BOOTLOADER_REFUSED"
  | "LIKEN_BOOTLOADER_ENTRY_MISSING"
  | "LIKEN_BOOTLOADER_IO"
  | "LIKEN_BOOTLOADER_ESP_FULL"
  | "LIKEN_BOOTLOADER_BOOT_FILES_INVALID"
  | "LIKEN_BOOTLOADER_BOOT_FILE_MISMATCH"
  | "LIKEN_BOOTLOADER_UNKNOWN_BACKEND";

export class BootloaderError extends LikenError {
  declare readonly code: BootloaderErrorCode;

  constructor(code: BootloaderErrorCode, message: string, opts: LikenErrorOptions = {}) {
    super(code, message, opts);
  }
}
