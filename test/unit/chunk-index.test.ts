// The chunk index: what the builder writes parses back, and every hostile index (well signed
// but wrong) is refused with the fault named, before a byte of it is used.
import { describe, expect, it } from "vitest";
import { createHash, randomBytes } from "node:crypto";
import { stringify } from "yaml";
import {
  ChunkIndex,
  encodeIndex,
  INDEX_CHUNK,
  IndexWriter,
  maxIndexBytes,
} from "../../src/verify/chunk-index.js";
import { VerifyError } from "../../src/verify/errors.js";
import { parseRelease } from "../../src/verify/release.js";

const B = INDEX_CHUNK;
const data = randomBytes(10 * B + 100);

function chunks(d: Buffer) {
  const out = [];
  for (let o = 0; o < d.length; o += B) {
    const p = d.subarray(o, o + B);
    out.push({ offset: o, length: p.length, hash: createHash("sha256").update(p).digest() });
  }
  return out;
}

function refusal(f: () => unknown): VerifyError {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(VerifyError);
    return e as VerifyError;
  }
  throw new Error("expected a refusal");
}

describe("chunk index", () => {
  it("reads back what the writer cut, in pieces of any size", () => {
    const w = new IndexWriter();
    for (let o = 0; o < data.length; o += 777) w.update(data.subarray(o, o + 777));
    const idx = ChunkIndex.parse(w.finish(), data.length, "t");
    expect(idx.count).toBe(11);
    expect(idx.offset(10)).toBe(10 * B);
    expect(idx.length(10)).toBe(100);
    expect(idx.hash(3).equals(chunks(data)[3]!.hash)).toBe(true);
    expect(idx.chunkAt(3 * B)).toBe(3);
    expect(idx.chunkAt(3 * B + 1)).toBe(4);
    expect(w.finish().equals(encodeIndex(data.length, chunks(data)))).toBe(true);
  });

  it("takes an empty artifact (no chunk)", () => {
    expect(ChunkIndex.parse(new IndexWriter().finish(), 0, "t").count).toBe(0);
  });

  it("reads offsets past 4 GiB exactly (both 32-bit halves of the u64)", () => {
    const big = 4 * 1024 * 1024; // the largest chunk: 1,025 of them pass 2^32 bytes
    const c = Array.from({ length: 1025 }, (_, i) => ({
      offset: i * big,
      length: big,
      hash: Buffer.alloc(32, i % 251),
    }));
    const idx = ChunkIndex.parse(encodeIndex(1025 * big, c), 1025 * big, "t");
    expect(idx.offset(1024)).toBe(2 ** 32);
    expect(idx.chunkAt(2 ** 32)).toBe(1024);
    c[1024]!.offset += 1;
    expect(() => ChunkIndex.parse(encodeIndex(1025 * big, c), 1025 * big, "t")).toThrow(
      /chunk 1024 starts at 4294967297, leaving bytes 4294967296-4294967296 in no chunk/,
    );
  });

  type Spoil = (c: ReturnType<typeof chunks>) => void;
  it.each<[string, Spoil, string, RegExp]>([
    [
      "overlap",
      (c) => (c[4]!.offset -= 1),
      "overlap",
      /chunk 4 starts at 16383, inside chunk 3 \(which ends at 16384\)/,
    ],
    [
      "a hole",
      (c) => (c[4]!.offset += 1),
      "hole",
      /chunk 4 starts at 16385, leaving bytes 16384-16384 in no chunk/,
    ],
    [
      "a hole at the end",
      (c) => c.pop(),
      "hole",
      /the chunks end at 40960, bytes 40960-41059 are in no chunk/,
    ],
    [
      "past the size",
      (c) => (c[10]!.length += 1),
      "past-size",
      /chunk 10 ends at 41061, past the artifact's 41060 bytes/,
    ],
    ["an empty chunk", (c) => (c[2]!.length = 0), "length", /chunk 2 is 0 bytes/],
    [
      "a short chunk in the middle",
      (c) => {
        c[2]!.length = 100;
        c[3] = { ...c[3]!, offset: 2 * B + 100, length: 2 * B - 100 };
      },
      "length",
      /chunk 2 is 100 bytes; only the last chunk may be shorter/,
    ],
  ])("refuses %s", (_name, spoil, fault, message) => {
    const c = chunks(data);
    spoil(c);
    const e = refusal(() =>
      ChunkIndex.parse(encodeIndex(data.length, c), data.length, "index of rootfs"),
    );
    expect(e.code).toBe("LIKEN_VERIFY_INDEX_INVALID");
    expect(e.context.fault).toBe(fault);
    expect(e.message).toMatch(message);
    expect(e.message).toMatch(
      /^index of rootfs: .*; the index does not describe the artifact, so it is not used$/,
    );
  });

  it("refuses absurdly many chunks from the header, before reading them", () => {
    const b = encodeIndex(data.length, chunks(data));
    b.writeUInt32BE(0xffffffff, 16);
    const e = refusal(() => ChunkIndex.parse(b, data.length, "t"));
    expect(e.context.fault).toBe("too-many");
    expect(e.message).toMatch(
      /claims 4294967295 chunks; 41060 bytes in chunks of at least 4096 have at most 11/,
    );
  });

  it.each([
    [
      "another size",
      (b: Buffer) => b.writeBigUInt64BE(5n, 8),
      /describes an artifact of 5 bytes, release.yaml says 41060/,
    ],
    [
      "a wrong magic",
      (b: Buffer) => b.write("XXXXXXXX", 0, "latin1"),
      /does not start with LKNIDX01/,
    ],
  ])("refuses %s", (_name, spoil, message) => {
    const b = encodeIndex(data.length, chunks(data));
    spoil(b);
    expect(refusal(() => ChunkIndex.parse(b, data.length, "t")).message).toMatch(message);
  });

  it("refuses trailing bytes", () => {
    const b = Buffer.concat([encodeIndex(data.length, chunks(data)), Buffer.alloc(3)]);
    expect(refusal(() => ChunkIndex.parse(b, data.length, "t")).message).toMatch(
      /is 507 bytes; a header and 11 chunks take 504/,
    );
  });

  it("release.yaml bounds the index's size by the artifact's before it is fetched", () => {
    const doc = (size: number) =>
      Buffer.from(
        stringify({
          apiVersion: "liken.sh/v1alpha1",
          kind: "Release",
          version: "1",
          artifacts: [
            {
              name: "rootfs",
              path: "r.img",
              size: data.length,
              digest: `sha256:${"a".repeat(64)}`,
              index: { path: "r.img.lkidx", size, digest: `sha256:${"b".repeat(64)}` },
            },
          ],
        }),
      );
    expect(parseRelease(doc(maxIndexBytes(data.length))).artifacts[0]!.index!.size).toBe(504);
    const e = refusal(() => parseRelease(doc(maxIndexBytes(data.length) + 1)));
    expect(e.message).toMatch(/artifacts\[0\]\.index\.size must be a whole number from 20 to 504/);
  });
});
