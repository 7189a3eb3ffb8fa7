// SparseWriter (src/release/sparse.ts): whatever the pieces it is given (cut anywhere, across
// 4 KiB blocks), the file reads back as the same bytes, and its zero blocks are holes.
import { describe, expect, it } from "vitest";
import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { HOLE_BLOCK, SparseWriter } from "../../src/release/sparse.js";

/** 256 blocks: runs of zero blocks, data blocks, and blocks zero but for one byte. */
function image(): Buffer {
  const b = Buffer.alloc(256 * HOLE_BLOCK);
  for (let i = 0; i < 256; i++) {
    if (i % 7 === 0) randomBytes(HOLE_BLOCK).copy(b, i * HOLE_BLOCK);
    if (i % 11 === 0) b[i * HOLE_BLOCK + HOLE_BLOCK - 1] = 1;
  }
  return b.subarray(0, b.length - 100); // and a short last block
}

describe("SparseWriter", () => {
  it.each([1 << 20, HOLE_BLOCK, 1000, 4097, 7])("pieces of %i bytes: same bytes", async (n) => {
    const dir = mkdtempSync(path.join(tmpdir(), "liken-sparse-"));
    try {
      const want = image();
      const file = path.join(dir, "out.img");
      const w = await SparseWriter.create(file);
      for (let o = 0; o < want.length; o += n) await w.write(want.subarray(o, o + n));
      expect(await w.finish()).toBe(want.length);
      expect(readFileSync(file).equals(want)).toBe(true);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("leaves zero blocks as holes, and a trailing hole as a size", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "liken-sparse-"));
    try {
      const file = path.join(dir, "out.img");
      const w = await SparseWriter.create(file);
      await w.write(randomBytes(HOLE_BLOCK));
      await w.write(Buffer.alloc(64 << 20));
      w.hole(64 << 20);
      await w.finish();
      const st = statSync(file);
      expect(st.size).toBe(HOLE_BLOCK + (128 << 20));
      expect(st.blocks * 512).toBeLessThan(1 << 20);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
