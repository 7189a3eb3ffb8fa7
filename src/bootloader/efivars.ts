// EFI variables of the systemd-boot loader interface (LoaderEntryDefault, LoaderEntryOneShot),
// stored as efivarfs stores them: one file per variable named NAME-GUID, holding a 4-byte
// little-endian attribute word and the value as UTF-16LE with a terminating NUL. A directory
// stands in for /sys/firmware/efi/efivars in tests. (On a real efivarfs, existing variables are
// immutable files: `chattr -i` them first, as bootctl does; not needed in the directory.)
import { open, readFile, unlink } from "node:fs/promises";
import { join } from "node:path";
import { BootloaderError } from "./errors.js";

/** The vendor GUID of systemd-boot's loader interface variables. */
export const LOADER_GUID = "4a67b082-0a4c-41cf-b6c7-440b29bb8c4f";
/** NON_VOLATILE | BOOTSERVICE_ACCESS | RUNTIME_ACCESS, as bootctl writes them. */
const ATTRS = 0x7;

export interface EfiVars {
  get(name: string): Promise<string | null>;
  set(name: string, value: string): Promise<void>;
  delete(name: string): Promise<void>;
}

export function encodeEfiString(value: string): Buffer {
  const head = Buffer.alloc(4);
  head.writeUInt32LE(ATTRS, 0);
  return Buffer.concat([head, Buffer.from(`${value}\0`, "utf16le")]);
}

export function decodeEfiString(bytes: Buffer, where: string): string {
  if (bytes.length < 4 || (bytes.length - 4) % 2 !== 0) {
    throw new BootloaderError(
      "LIKEN_BOOTLOADER_IO",
      `EFI variable ${where} is ${bytes.length} bytes: not an attribute word and a UTF-16 string`,
    );
  }
  return bytes.subarray(4).toString("utf16le").replace(/\0+$/, "");
}

export class EfivarfsDir implements EfiVars {
  constructor(readonly dir: string) {}

  private path(name: string): string {
    return join(this.dir, `${name}-${LOADER_GUID}`);
  }

  async get(name: string): Promise<string | null> {
    try {
      return decodeEfiString(await readFile(this.path(name)), this.path(name));
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === "ENOENT") return null;
      throw e;
    }
  }

  async set(name: string, value: string): Promise<void> {
    // efivarfs takes a variable in one write() call; a directory gets the same single write.
    const fh = await open(this.path(name), "w");
    try {
      await fh.write(encodeEfiString(value));
      // A directory's file is synced; efivarfs has no fsync (EINVAL, seen on a booted guest):
      // there the write itself went to the firmware, and there is nothing more to sync.
      await fh.sync().catch((e: NodeJS.ErrnoException) => {
        if (e.code !== "EINVAL") throw e;
      });
    } finally {
      await fh.close();
    }
  }

  async delete(name: string): Promise<void> {
    try {
      await unlink(this.path(name));
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "ENOENT") throw e;
    }
  }
}
