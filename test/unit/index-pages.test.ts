// The paged index and the zstd frame header (pure): pages round-trip to the classic index, a
// stretch of unchanged chunks is the same page in two releases, and a frame's declared size is
// read as RFC 8878 writes it.
import { describe, expect, it } from "vitest";
import { createHash, randomBytes } from "node:crypto";
import { IndexWriter } from "../../src/verify/chunk-index.js";
import { assemble, checkPage, paginate, TopIndex } from "../../src/verify/index-pages.js";
import { encodeFrame, frameContentSize } from "../../src/verify/zstd.js";
import { bombFrame } from "../support/zstd-frames.js";

const B = 4096;

function chunksOf(data: Buffer) {
  const out = [];
  for (let o = 0; o < data.length; o += B) {
    const c = data.subarray(o, o + B);
    out.push({
      length: c.length,
      hash: createHash("sha256").update(c).digest(),
      frame: 100 + (o % 7),
    });
  }
  return out;
}

describe("index pages", () => {
  const data = randomBytes(10 * B + 123);
  const w = new IndexWriter();
  w.update(data);
  const classic = w.finish();

  it("assemble(paginate(x)) is the classic index, frames at their cumulative offsets", () => {
    const chunks = chunksOf(data);
    const { top, pages, packSize } = paginate(data.length, chunks, 4);
    const t = TopIndex.parse(top, data.length, pages.length, "top");
    expect([t.pages, t.count, packSize]).toEqual([3, 11, chunks.reduce((n, c) => n + c.frame, 0)]);
    const { index, frames } = assemble(t, (p) =>
      pages.subarray(t.page(p).at, t.page(p).at + t.page(p).length),
    );
    expect(index.equals(classic)).toBe(true);
    expect([frames.packOffset(5), frames.frameLength(5)]).toEqual([
      chunks.slice(0, 5).reduce((n, c) => n + c.frame, 0),
      chunks[5]!.frame,
    ]);
  });

  it("a page holds no absolute offset: a change in page 0 leaves page 1's hash alone", () => {
    const other = Buffer.from(data);
    other[0]! ^= 1;
    const a = TopIndex.parse(
      paginate(data.length, chunksOf(data), 4).top,
      data.length,
      11 * 40,
      "a",
    );
    const b = TopIndex.parse(
      paginate(data.length, chunksOf(other), 4).top,
      data.length,
      11 * 40,
      "b",
    );
    expect(a.page(0).hash.equals(b.page(0).hash)).toBe(false);
    expect(a.page(1).hash.equals(b.page(1).hash)).toBe(true);
  });

  it("refuses a page off its hash, and a top whose pages do not add up", () => {
    const { top, pages } = paginate(data.length, chunksOf(data), 4);
    const t = TopIndex.parse(top, data.length, pages.length, "top");
    const p0 = Buffer.from(pages.subarray(0, 160));
    p0[5]! ^= 1; // a frame length
    expect(() => checkPage(t, 0, p0, "x")).toThrow(
      /page 0 \(160 bytes\) has sha256:[0-9a-f]{64}, the top index says/,
    );
    expect(() => TopIndex.parse(top, data.length, pages.length + 40, "top")).toThrow(
      /its pages take 440 bytes, release.yaml says 480/,
    );
  });
});

describe("zstd frame header", () => {
  it.each([
    [
      "a frame liken wrote (single segment, size in 2 bytes)",
      async () => encodeFrame(Buffer.alloc(4096, 1)),
      4096,
    ],
    ["a bomb that declares 8 MiB", async () => bombFrame(8 << 20, true), 8 << 20],
    ["a bomb that declares nothing", async () => bombFrame(8 << 20, false), "unknown"],
    ["not zstd", async () => Buffer.from("hello world"), "invalid"],
    ["too short", async () => Buffer.from([0x28, 0xb5]), "invalid"],
  ])("%s", async (_n, make, want) => {
    expect(frameContentSize(await make())).toBe(want);
  });
});
