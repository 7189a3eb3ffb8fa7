// EFI variables of the systemd-boot loader interface (LoaderEntryDefault, LoaderEntryOneShot),
// stored as efivarfs stores them: one file per variable named NAME-GUID, holding a 4-byte
// little-endian attribute word and the value as UTF-16LE with a terminating NUL. A directory
// stands in for /sys/firmware/efi/efivars in tests. On a real efivarfs two things differ from a
// directory, and EfivarfsDir handles both as bootctl does: a variable of a vendor GUID the
// kernel does not know (systemd-boot's) is an immutable file, which cannot be opened for
// writing nor deleted until its immutable attribute is cleared (and it is set again after a
// write); and efivarfs has no fsync (EINVAL): a write() returns once SetVariable() stored it.
import { constants } from "node:os";
import { open, readFile, unlink } from "node:fs/promises";
import { join } from "node:path";
import { setImmutable } from "../native/index.js";
import { BootloaderError } from "./errors.js";

const { ENOENT } = constants.errno;

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
    const p = this.path(name);
    const wasImmutable = unlock(p);
    // efivarfs takes a variable in one write() call; a directory gets the same single write.
    const fh = await open(p, "w");
    try {
      await fh.write(encodeEfiString(value));
      await syncUnlessEfivarfs(fh);
    } finally {
      await fh.close();
    }
    if (wasImmutable === true) setImmutable(p, true);
  }

  async delete(name: string): Promise<void> {
    const p = this.path(name);
    if (unlock(p) === undefined) return;
    try {
      await unlink(p);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "ENOENT") throw e;
    }
  }
}

/**
 * Clears the immutable attribute of an existing variable file: whether it was set (null: the
 * filesystem has none), or undefined when there is no such file.
 */
function unlock(p: string): boolean | null | undefined {
  try {
    return setImmutable(p, false);
  } catch (e) {
    if ((e as { errno?: number }).errno === ENOENT) return undefined;
    throw e;
  }
}

/** fsync; efivarfs has none and says EINVAL, its write() having reached the firmware already. */
async function syncUnlessEfivarfs(fh: { sync(): Promise<void> }): Promise<void> {
  try {
    await fh.sync();
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "EINVAL") throw e;
  }
}
