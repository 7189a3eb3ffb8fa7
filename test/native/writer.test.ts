import { afterAll, describe, expect, it } from "vitest";
import { createHash, randomBytes } from "node:crypto";
import { execFileSync } from "node:child_process";
import {
  chmodSync,
  closeSync,
  mkdtempSync,
  openSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { NativeError } from "../../src/native/index.js";
import { readback, SlotWriter, writerBufferBytes } from "../../src/native/writer.js";
import { loopAvailable, withLoopDevice } from "./loop.js";

const dir = mkdtempSync(path.join(tmpdir(), "liken-writer-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const MiB = 1024 * 1024;
const sha = (b: Buffer) => createHash("sha256").update(b).digest("hex");

/** Feeds data to the writer in uneven pieces, as a socket would deliver them. */
async function feed(w: SlotWriter, data: Buffer, from = 0, to = data.length): Promise<void> {
  let off = from;
  let step = 1;
  while (off < to) {
    const n = Math.min(to - off, 65_521 * step);
    await w.write(data.subarray(off, off + n));
    off += n;
    step = (step % 7) + 1;
  }
}

function slotFile(name: string, size: number, fill = 0xee): string {
  const f = path.join(dir, name);
  writeFileSync(f, Buffer.alloc(size, fill));
  return f;
}

/**
 * Makes f refuse O_WRONLY: mode 0444 for a user, the immutable attribute for root (who
 * ignores modes). False when neither holds here (root without CAP_LINUX_IMMUTABLE).
 */
function makeUnwritable(f: string): boolean {
  chmodSync(f, 0o444);
  if (process.getuid?.() === 0) {
    try {
      execFileSync("chattr", ["+i", f], { stdio: "ignore" });
    } catch {
      return false;
    }
  }
  try {
    closeSync(openSync(f, "r+"));
    return false;
  } catch {
    return true;
  }
}

function makeWritable(f: string): void {
  if (process.getuid?.() === 0) execFileSync("chattr", ["-i", f], { stdio: "ignore" });
  chmodSync(f, 0o644);
}

async function rejection(p: Promise<unknown>): Promise<NativeError> {
  try {
    await p;
  } catch (e) {
    return e as NativeError;
  }
  throw new Error("expected a rejection");
}

describe("SlotWriter, whole-stream mode", () => {
  it("returns the SHA-256 Node computes and lands the bytes at the offset, neighbours intact", async () => {
    const data = randomBytes(9 * MiB + 12_345); // an unaligned tail
    const f = slotFile("whole.img", 16 * MiB);
    const w = SlotWriter.open({ path: f, offset: 1 * MiB, size: data.length, bufferSize: MiB });
    await feed(w, data);
    const { digest } = await w.finish();
    expect(digest).toBe(sha(data));
    const disk = readFileSync(f);
    expect(disk.length).toBe(16 * MiB);
    expect(disk.subarray(MiB, MiB + data.length).equals(data)).toBe(true);
    expect(disk.subarray(0, MiB).every((b) => b === 0xee)).toBe(true);
    expect(disk.subarray(MiB + data.length).every((b) => b === 0xee)).toBe(true);
    expect(await readback(f, { offset: MiB, size: data.length })).toBe(sha(data));
  });

  it("refuses a byte beyond the declared size and writes none of it", async () => {
    const f = slotFile("beyond.img", 4 * MiB);
    const w = SlotWriter.open({ path: f, size: 100_000, bufferSize: MiB });
    await w.write(Buffer.alloc(99_999, 1));
    const e = await rejection(w.write(Buffer.alloc(2, 2)));
    expect(e.code).toBe("LIKEN_NATIVE_BEYOND_SIZE");
    expect(e.message).toMatch(/1 bytes beyond the declared size 100000/);
    expect((await rejection(w.finish())).code).toBe("LIKEN_NATIVE_BEYOND_SIZE");
  });

  it("fails a stream that ends short of the declared size", async () => {
    const f = slotFile("short.img", 4 * MiB);
    const w = SlotWriter.open({ path: f, size: 3 * MiB, bufferSize: MiB });
    await w.write(Buffer.alloc(2 * MiB + 5, 1));
    const e = await rejection(w.finish());
    expect(e.code).toBe("LIKEN_NATIVE_SHORT");
    expect(e.message).toMatch(/got 2097157 of the declared 3145728/);
  });

  it("resumes from a checkpoint in a new writer with the saved hash state", async () => {
    const data = randomBytes(7 * MiB + 99);
    const f = slotFile("resume.img", 8 * MiB);
    const a = SlotWriter.open({ path: f, size: data.length, bufferSize: MiB });
    await feed(a, data, 0, 3 * MiB + 777); // the 777 bytes in the filling buffer are lost
    const cp = await a.checkpoint(); // what the write thread has written so far: a prefix
    expect(cp.offset % MiB).toBe(0);
    expect(cp.offset).toBeLessThanOrEqual(3 * MiB);
    a.abort();
    const b = SlotWriter.open({
      path: f,
      size: data.length,
      bufferSize: MiB,
      start: cp.offset,
      hashState: Buffer.from(cp.hashState),
    });
    await feed(b, data, cp.offset);
    expect((await b.finish()).digest).toBe(sha(data));
    expect(readFileSync(f).subarray(0, data.length).equals(data)).toBe(true);
  });

  it("refuses a hash state that is not its own", () => {
    const f = slotFile("state.img", 2 * MiB);
    expect(() =>
      SlotWriter.open({
        path: f,
        size: 2 * MiB,
        bufferSize: MiB,
        start: MiB,
        hashState: Buffer.alloc(40),
      }),
    ).toThrowError(expect.objectContaining({ code: "LIKEN_NATIVE_BAD_STATE" }) as Error);
  });

  it("names the open call it made: O_DIRECT only when direct writes are on", async (ctx) => {
    const f = slotFile("read-only.img", MiB);
    if (!makeUnwritable(f)) {
      await ctx.annotate(
        "cannot make a file unwritable here (chattr +i); open failure not exercised",
      );
      return;
    }
    try {
      for (const direct of [true, false]) {
        let e: unknown;
        try {
          SlotWriter.open({ path: f, size: 10, direct }).abort();
        } catch (caught) {
          e = caught;
        }
        expect(e).toBeInstanceOf(NativeError);
        expect((e as NativeError).code).toBe("LIKEN_NATIVE_IO");
        expect((e as NativeError).message).toContain(
          `${direct ? "open(O_DIRECT)" : "open"} ${f}: `,
        );
      }
    } finally {
      makeWritable(f);
    }
  });

  it("refuses an unaligned offset before touching the medium", () => {
    const f = slotFile("align.img", 2 * MiB);
    expect(() => SlotWriter.open({ path: f, offset: 512, size: 10 })).toThrowError(
      /not a multiple of the block size 4096/,
    );
  });
});

describe("SlotWriter, chunk mode", () => {
  const chunk = MiB;
  const data = randomBytes(5 * MiB + 4097);
  const digests = Array.from({ length: 6 }, (_, i) =>
    sha(data.subarray(i * chunk, (i + 1) * chunk)),
  );

  it("writes chunks that match and returns no whole digest (read-back gives it)", async () => {
    const f = slotFile("chunks.img", 6 * MiB);
    const w = SlotWriter.open({
      path: f,
      size: data.length,
      chunkSize: chunk,
      chunkDigests: digests,
    });
    await feed(w, data);
    expect((await w.finish()).digest).toBeNull();
    expect(await readback(f, { size: data.length })).toBe(sha(data));
  });

  it("refuses a bad chunk before it is written and names it", async () => {
    const f = slotFile("badchunk.img", 6 * MiB, 0x55);
    const bad = Buffer.from(data);
    bad[3 * chunk + 1000]! ^= 0x01;
    const w = SlotWriter.open({
      path: f,
      size: data.length,
      chunkSize: chunk,
      chunkDigests: digests,
    });
    const e = await rejection(feed(w, bad).then(() => w.finish()));
    expect(e.code).toBe("LIKEN_NATIVE_CHUNK_MISMATCH");
    expect(e.context.chunk).toBe(3);
    w.abort();
    const disk = readFileSync(f);
    expect(disk.subarray(0, 3 * chunk).equals(data.subarray(0, 3 * chunk))).toBe(true);
    // The bad chunk and everything after it never reached the medium.
    expect(disk.subarray(3 * chunk).every((b) => b === 0x55)).toBe(true);
    // Fetch again from the bad chunk: the slot ends up whole.
    const again = SlotWriter.open({
      path: f,
      size: data.length,
      chunkSize: chunk,
      chunkDigests: digests,
      start: 3 * chunk,
    });
    await feed(again, data, 3 * chunk);
    await again.finish();
    expect(await readback(f, { size: data.length })).toBe(sha(data));
  });
});

describe("SlotWriter, its buffers", () => {
  // What the writers hold is counted where they allocate and free (native/writer.cc); buffers
  // this size (above glibc's 32 MiB mmap threshold) are each their own mapping, which free()
  // unmaps at once. The process's RSS said the same, but moved by tens of MiB on its own
  // while V8 worked on other threads: CI saw a drop of one buffer where three were freed.
  const BIG = 36 * MiB;

  it("gives its buffers back when finish() settles, not when V8 collects the writer", async () => {
    const data = Buffer.alloc(3 * BIG, 7);
    const f = slotFile("release.img", 3 * BIG);
    const before = writerBufferBytes();
    const w = SlotWriter.open({ path: f, size: data.length, bufferSize: BIG, buffers: 3 });
    expect(writerBufferBytes() - before).toBe(3 * BIG);
    await feed(w, data);
    expect((await w.finish()).digest).toBe(sha(data));
    // The writer is still referenced here: only an explicit release can have freed them.
    expect(writerBufferBytes()).toBe(before);
    const e = await rejection(w.write(Buffer.alloc(1)));
    expect(e.code).toBe("LIKEN_NATIVE_BAD_STATE");
    expect(e.message).toMatch(/the writer is finished/);
  });

  it("gives them back on abort()", async () => {
    const f = slotFile("release-abort.img", 3 * BIG);
    const before = writerBufferBytes();
    const w = SlotWriter.open({ path: f, size: 3 * BIG, bufferSize: BIG, buffers: 3 });
    await feed(w, Buffer.alloc(2 * BIG + MiB, 3)); // every buffer touched
    expect(writerBufferBytes() - before).toBe(3 * BIG);
    w.abort();
    expect(writerBufferBytes()).toBe(before);
    expect((await rejection(w.write(Buffer.alloc(1)))).code).toBe("LIKEN_NATIVE_ABORTED");
  });
});

describe("on a loop device", () => {
  it.skipIf(!loopAvailable)(
    "writes with O_DIRECT, reads back, and fails clearly when the device is too small",
    async () => {
      const img = path.join(dir, "loop.img");
      writeFileSync(img, Buffer.alloc(4 * MiB));
      await withLoopDevice(img, async (loop) => {
        const data = randomBytes(3 * MiB + 333);
        const w = SlotWriter.open({ path: loop, offset: 4096, size: data.length, bufferSize: MiB });
        await feed(w, data);
        expect((await w.finish()).digest).toBe(sha(data));
        expect(await readback(loop, { offset: 4096, size: data.length })).toBe(sha(data));

        const big = SlotWriter.open({ path: loop, size: 5 * MiB, bufferSize: MiB });
        const e = await rejection(feed(big, randomBytes(5 * MiB)).then(() => big.finish()));
        expect(e.code).toBe("LIKEN_NATIVE_IO");
        expect(e.message).toMatch(/medium ends before the artifact does|No space/);
        const r = await rejection(readback(loop, { size: 5 * MiB }));
        expect(r.code).toBe("LIKEN_NATIVE_SHORT");
      });
    },
  );
});
