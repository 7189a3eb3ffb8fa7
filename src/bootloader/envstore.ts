// Where the two copies of liken's GRUB environment block live. Both implementations write in
// place (the same sectors GRUB's save_env rewrites; a new file or a rename would move the blocks)
// and fsync before returning, so the next write starts only after this one reached the medium.
import { closeSync, fstatSync, openSync, readSync } from "node:fs";
import { open } from "node:fs/promises";
import { join } from "node:path";
import { BootloaderError } from "./errors.js";
import { ENVBLK_SIZE } from "./grubenv.js";

export type EnvCopy = 0 | 1;

export interface EnvStore {
  /** Names the copy for messages: a path, or an image file and offset. */
  describe(copy: EnvCopy): string;
  /** The copy's bytes, or null when it does not exist. */
  read(copy: EnvCopy): Promise<Buffer | null>;
  /** Overwrites the copy in place with exactly ENVBLK_SIZE bytes and syncs it. */
  write(copy: EnvCopy, bytes: Buffer): Promise<void>;
}

/** File names of the two copies inside the environment directory (on the ESP). */
export const ENV_FILES: readonly [string, string] = ["grubenv", "grubenv2"];

function ioError(what: string, where: string, cause: unknown): BootloaderError {
  return new BootloaderError("LIKEN_BOOTLOADER_IO", `${what} ${where} failed: ${String(cause)}`, {
    retryable: true,
    cause,
    context: { where },
  });
}

/**
 * Reads `len` bytes at `offset`, or (len null) the whole file, capped one byte past a block.
 * Synchronous on purpose: the agent reads both copies every loop turn, and each step of an
 * async read (open, stat, read, close) is a trip through libuv's thread pool that wakes two
 * threads; for a 1 KiB block that is most of an idle agent's CPU (docs/agent.md, "Where an idle
 * agent's CPU goes"). A read of the page cache takes microseconds.
 */
async function readAt(
  path: string,
  offset: number,
  len: number | null,
  where: string,
): Promise<Buffer | null> {
  let fd;
  try {
    fd = openSync(path, "r");
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return null;
    throw ioError("opening", where, e);
  }
  try {
    // A file is as long as it is (a short or long file is a corrupt block, and says so).
    const n = len ?? Math.min(fstatSync(fd).size, ENVBLK_SIZE + 1);
    const buf = Buffer.alloc(n);
    const bytesRead = readSync(fd, buf, 0, n, offset);
    return buf.subarray(0, bytesRead);
  } catch (e) {
    throw ioError("reading", where, e);
  } finally {
    closeSync(fd);
  }
}

async function writeAt(path: string, offset: number, bytes: Buffer, where: string): Promise<void> {
  if (bytes.length !== ENVBLK_SIZE) {
    throw new BootloaderError(
      "LIKEN_BOOTLOADER_IO",
      `refusing to write ${bytes.length} bytes to ${where}`,
    );
  }
  let fh;
  try {
    // "r+" never creates or truncates: the copy keeps its blocks, as GRUB's save_env needs.
    fh = await open(path, "r+");
    let done = 0;
    while (done < bytes.length) {
      const { bytesWritten } = await fh.write(bytes, done, bytes.length - done, offset + done);
      done += bytesWritten;
    }
    await fh.sync();
  } catch (e) {
    throw ioError("writing", where, e);
  } finally {
    await fh?.close();
  }
}

/** The two copies as files in a directory of the mounted ESP (e.g. /boot/efi/EFI/liken). */
export class DirEnvStore implements EnvStore {
  constructor(readonly dir: string) {}

  describe(copy: EnvCopy): string {
    return join(this.dir, ENV_FILES[copy]);
  }

  read(copy: EnvCopy): Promise<Buffer | null> {
    return readAt(this.describe(copy), 0, null, this.describe(copy));
  }

  write(copy: EnvCopy, bytes: Buffer): Promise<void> {
    return writeAt(this.describe(copy), 0, bytes, this.describe(copy));
  }
}

/**
 * The two copies as byte ranges of a disk image (the files' clusters inside the ESP's FAT),
 * so the host can edit a testbed image the way the machine would edit its mounted ESP.
 */
export class ImageEnvStore implements EnvStore {
  constructor(
    readonly image: string,
    readonly offsets: readonly [number, number],
  ) {}

  describe(copy: EnvCopy): string {
    return `${this.image}@${this.offsets[copy]} (${ENV_FILES[copy]})`;
  }

  read(copy: EnvCopy): Promise<Buffer | null> {
    return readAt(this.image, this.offsets[copy], ENVBLK_SIZE, this.describe(copy));
  }

  write(copy: EnvCopy, bytes: Buffer): Promise<void> {
    return writeAt(this.image, this.offsets[copy], bytes, this.describe(copy));
  }
}

/** Copies in memory; the fault tests wrap it to cut a write short. */
export class MemoryEnvStore implements EnvStore {
  readonly copies: [Buffer | null, Buffer | null];

  constructor(copies: [Buffer | null, Buffer | null] = [null, null]) {
    this.copies = copies;
  }

  describe(copy: EnvCopy): string {
    return `memory:${ENV_FILES[copy]}`;
  }

  read(copy: EnvCopy): Promise<Buffer | null> {
    const c = this.copies[copy];
    return Promise.resolve(c === null ? null : Buffer.from(c));
  }

  write(copy: EnvCopy, bytes: Buffer): Promise<void> {
    this.copies[copy] = Buffer.from(bytes);
    return Promise.resolve();
  }
}
