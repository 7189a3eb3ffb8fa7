// Slot images are mostly zeros: an ext4 of 4 GiB holding 600 MB of files has 3.4 GB of blocks
// never written. Written as they are, every zero is a block on the channel's disk (a release of
// a 4 GiB slot took 4.0 GB, Node's copyFile writes every byte it reads); written sparse, a zero
// block is a hole the file system does not store and a reader still reads as zeros, so the
// file's bytes, digest and chunk index are the same. A file that is not sparse is written the
// same way, so a dense image handed to `liken release build -a` is published sparse too.
import { createReadStream } from "node:fs";
import { open, stat, type FileHandle } from "node:fs/promises";

/**
 * The unit a hole is made of: the block size of ext4, XFS and btrfs as made by default (a file
 * system can only leave whole blocks out), and the slot's own alignment (SLOT_ALIGN).
 */
export const HOLE_BLOCK = 4096;
const ZERO = Buffer.alloc(HOLE_BLOCK);
/** A whole piece of zeros is told by one compare: most of an empty slot's pieces are. */
const ZERO_PIECE = Buffer.alloc(1024 * 1024);

/** Writes a stream of pieces to a file, leaving every all-zero 4 KiB block a hole. */
export class SparseWriter {
  private at = 0;

  private constructor(private readonly fd: FileHandle) {}

  /** Creates (or empties) `file`. */
  static async create(file: string, mode = 0o644): Promise<SparseWriter> {
    return new SparseWriter(await open(file, "w", mode));
  }

  /** The next piece, at the offset the previous ones end at. */
  async write(piece: Buffer): Promise<void> {
    if (piece.length <= ZERO_PIECE.length && piece.equals(ZERO_PIECE.subarray(0, piece.length))) {
      this.at += piece.length;
      return;
    }
    // Pieces may cut a block anywhere: runs of non-zero blocks are written at their offset; a
    // block cut by the piece's end is judged by its part in this piece (written if non-zero).
    let run = -1;
    const flush = async (end: number): Promise<void> => {
      if (run < 0) return;
      await this.writeAll(piece.subarray(run, end), this.at + run);
      run = -1;
    };
    for (let off = 0; off < piece.length;) {
      const inBlock = (this.at + off) % HOLE_BLOCK;
      const n = Math.min(HOLE_BLOCK - inBlock, piece.length - off);
      const zero = piece
        .subarray(off, off + n)
        .equals(n === HOLE_BLOCK ? ZERO : ZERO.subarray(0, n));
      if (zero) await flush(off);
      else if (run < 0) run = off;
      off += n;
    }
    await flush(piece.length);
    this.at += piece.length;
  }

  /** `n` bytes of zeros next, written as nothing (a hole). */
  hole(n: number): void {
    this.at += n;
  }

  private async writeAll(b: Buffer, position: number): Promise<void> {
    for (let done = 0; done < b.length;) {
      const { bytesWritten } = await this.fd.write(b, done, b.length - done, position + done);
      done += bytesWritten;
    }
  }

  /** Sets the file's size (a trailing hole is only a size) and closes it; returns the size. */
  async finish(): Promise<number> {
    try {
      await this.fd.truncate(this.at);
      await this.fd.sync();
    } finally {
      await this.fd.close();
    }
    return this.at;
  }

  /** Closes without finishing (the caller removes the file). */
  async abort(): Promise<void> {
    await this.fd.close().catch(() => undefined);
  }
}

/** Copies `src` to `dst` sparse (see above); returns the size. */
export async function copySparse(src: string, dst: string): Promise<number> {
  const w = await SparseWriter.create(dst);
  try {
    for await (const piece of createReadStream(src, { highWaterMark: 1024 * 1024 }))
      await w.write(piece as Buffer);
  } catch (e) {
    await w.abort();
    throw e;
  }
  return w.finish();
}

/** The bytes a file takes on its disk (st_blocks of 512 bytes), not its size. */
export async function diskBytes(file: string): Promise<number> {
  return (await stat(file)).blocks * 512;
}
