// The installer's error family (`liken machine install|image`). Every refusal before the first
// write leaves the disk untouched, and says so; every code is stable and documented in
// docs/day-1.md ("When the installer refuses").
import { LikenError, type LikenErrorOptions } from "../errors.js";

export type InstallCode =
  /** A flag's value is not usable (a size, a bootloader name, a file that is not there). */
  | "LIKEN_INSTALL_BAD_INPUT"
  /** The target is not a block device (install) or cannot be made a file (image). */
  | "LIKEN_INSTALL_NOT_A_DISK"
  /** The disk has a partition table or a filesystem, and --wipe was not given. */
  | "LIKEN_INSTALL_DISK_HAS_PARTITIONS"
  /** The disk or one of its partitions is mounted, or used as swap. */
  | "LIKEN_INSTALL_DISK_MOUNTED"
  /** The disk is held by another device (LVM, RAID, dm-crypt) or opened exclusively. */
  | "LIKEN_INSTALL_DISK_IN_USE"
  /** The layout (ESP, two slots, state) does not fit the disk. */
  | "LIKEN_INSTALL_DISK_TOO_SMALL"
  /** The release does not fit the slot size given. */
  | "LIKEN_INSTALL_SLOT_TOO_SMALL"
  /** The release is not one the installer can put in a slot (no rootfs, no agent in it). */
  | "LIKEN_INSTALL_RELEASE_UNUSABLE"
  /** What was written does not read back as the release says. */
  | "LIKEN_INSTALL_VERIFY_FAILED"
  /** A tool the installer runs (sgdisk, mkfs.vfat, mke2fs, grub-mkimage...) is missing or failed. */
  | "LIKEN_INSTALL_TOOL_FAILED";

export class InstallError extends LikenError {
  declare readonly code: InstallCode;
  constructor(code: InstallCode, message: string, opts: LikenErrorOptions = {}) {
    super(code, message, opts);
  }
}

/** What every refusal before the first write adds: the disk is as it was. */
export const NOTHING_WRITTEN = "nothing was written to the disk";
