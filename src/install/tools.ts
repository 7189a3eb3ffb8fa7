// The tools the installer runs (sgdisk, mkfs.vfat, mtools, mke2fs, grub-mkimage, dd): each call
// returns its stdout; a missing tool names the Debian package that brings it, a failing one its
// stderr, both as LIKEN_INSTALL_TOOL_FAILED.
import { execFileSync } from "node:child_process";
import { InstallError } from "./errors.js";

/** Which Debian package brings each tool (docs/day-1.md lists them for the installing host). */
export const TOOL_PACKAGES: Record<string, string> = {
  sgdisk: "gdisk",
  "mkfs.vfat": "dosfstools",
  mmd: "mtools",
  mcopy: "mtools",
  mke2fs: "e2fsprogs",
  debugfs: "e2fsprogs",
  "grub-mkimage": "grub-efi-amd64-bin (and grub-common)",
  blkid: "util-linux",
  blockdev: "util-linux",
  dd: "coreutils",
};

export function run(cmd: string, args: string[], opts: { input?: Buffer } = {}): string {
  try {
    return execFileSync(cmd, args, {
      input: opts.input,
      encoding: "latin1",
      stdio: [opts.input === undefined ? "ignore" : "pipe", "pipe", "pipe"],
      maxBuffer: 64 * 1024 * 1024,
    });
  } catch (cause) {
    const e = cause as NodeJS.ErrnoException & { stderr?: string; status?: number };
    if (e.code === "ENOENT") {
      throw new InstallError(
        "LIKEN_INSTALL_TOOL_FAILED",
        `${cmd} is not installed: install ${TOOL_PACKAGES[cmd] ?? cmd} on the host that installs`,
        { cause, context: { tool: cmd } },
      );
    }
    const err = String(e.stderr ?? "")
      .trim()
      .split("\n")
      .slice(-3)
      .join("; ");
    throw new InstallError(
      "LIKEN_INSTALL_TOOL_FAILED",
      `${cmd} ${args.join(" ")} failed (exit ${e.status ?? "?"}): ${err || e.message}`,
      { cause, context: { tool: cmd, args } },
    );
  }
}

/**
 * Copies the file `src` into `disk` at byte `offset` (a multiple of 1 MiB), leaving the rest;
 * synced unless `sync` is false (a build cache's file that nothing boots yet).
 */
export function place(disk: string, src: string, offset: number, sync = true): void {
  run("dd", [
    `if=${src}`,
    `of=${disk}`,
    "bs=1M",
    `seek=${offset / (1024 * 1024)}`,
    sync ? "conv=notrunc,fsync" : "conv=notrunc",
    "status=none",
  ]);
}
