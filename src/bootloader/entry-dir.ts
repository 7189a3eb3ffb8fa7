// The directory of systemd-boot's entry files (loader/entries on the ESP), as the systemd-boot
// backend uses it: list, rename, sync. The backend makes every rename durable itself (the file,
// then its directory: on FAT, as on ext4, a rename lives in the page cache until the directory
// is synced), because an EFI variable it writes next names the entry by its new name; the
// power-cut tests give it a directory that forgets every rename not synced (entry-dir tests).
import { open, readdir, rename } from "node:fs/promises";
import { join } from "node:path";
import { BootloaderError } from "./errors.js";

export interface EntryDir {
  readonly path: string;
  list(): Promise<string[]>;
  /** Renames `from` to `to` inside the directory; not yet durable. */
  rename(from: string, to: string): Promise<void>;
  /** fsync of the file `name` in the directory, or of the directory itself (name undefined). */
  sync(name?: string): Promise<void>;
}

/** The entries directory on the mounted ESP. */
export class DiskEntryDir implements EntryDir {
  constructor(readonly path: string) {}

  list(): Promise<string[]> {
    return readdir(this.path);
  }

  rename(from: string, to: string): Promise<void> {
    return rename(join(this.path, from), join(this.path, to));
  }

  async sync(name?: string): Promise<void> {
    const p = name === undefined ? this.path : join(this.path, name);
    let fh;
    try {
      // A directory opens read-only for fsync (O_RDONLY works on files too).
      fh = await open(p, "r");
      await fh.sync();
    } catch (e) {
      throw new BootloaderError(
        "LIKEN_BOOTLOADER_IO",
        `syncing ${p} failed: ${String(e)}; the ESP may be read-only or failing`,
        { retryable: true, cause: e, context: { where: p } },
      );
    } finally {
      await fh?.close();
    }
  }
}

/**
 * Renames an entry and makes the new name durable before returning: the file, then its
 * directory. Must never be skipped before an EFI variable names the entry by its new name: a
 * power cut would leave the variable naming a name the ESP no longer holds (systemd-boot would
 * then boot the trial slot through the one-shot without counting the try).
 */
export async function renameDurably(dir: EntryDir, from: string, to: string): Promise<void> {
  if (from === to) return;
  await dir.rename(from, to);
  await dir.sync(to);
  await dir.sync();
}
