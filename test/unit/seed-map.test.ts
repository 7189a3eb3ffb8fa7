// The running slot's chunk map: found by hash and length, and among copies (zero blocks) the
// one that keeps local reads contiguous; and a sample counted against kept indexes without it.
import { describe, expect, it } from "vitest";
import { createHash } from "node:crypto";
import { countHeld, SeedMap } from "../../src/slots/seed-map.js";
import { ChunkIndex, encodeIndex } from "../../src/verify/chunk-index.js";

const h = (s: string): Buffer => createHash("sha256").update(s).digest();

describe("SeedMap", () => {
  const m = new SeedMap();
  for (let i = 0; i < 3000; i++) m.add(h(i % 3 === 0 ? "zero" : `block ${i}`), 4096, i * 4096);
  m.add(h("short"), 100, 5_000_000);

  it("finds a chunk by hash and length", () => {
    expect(m.find(h("block 7"), 4096)).toBe(7 * 4096);
    expect(m.find(h("short"), 100)).toBe(5_000_000);
    expect(m.find(h("short"), 4096)).toBeUndefined();
    expect(m.find(h("nowhere"), 4096)).toBeUndefined();
  });

  it("prefers the given offsets among copies, else the first", () => {
    expect(m.find(h("zero"), 4096)).toBe(0);
    expect(m.find(h("zero"), 4096, [2997 * 4096])).toBe(2997 * 4096);
    expect(m.find(h("zero"), 4096, [4096, 300 * 4096])).toBe(300 * 4096);
    expect(m.find(h("block 7"), 4096, [0])).toBe(7 * 4096);
  });
});

/** An index of chunks named by strings, each 4096 bytes but the last `short` (if given). */
function indexOf(names: string[], short?: number): ChunkIndex {
  const lengths = names.map((_, i) => (i === names.length - 1 && short ? short : 4096));
  const size = lengths.reduce((a, b) => a + b, 0);
  const chunks = names.map((n, i) => ({ offset: i * 4096, length: lengths[i]!, hash: h(n) }));
  return ChunkIndex.parse(encodeIndex(size, chunks), size, "test index");
}

describe("countHeld", () => {
  const one = indexOf(["a", "b", "zero", "zero", "c"]);
  const two = indexOf(["d", "tail"], 100);
  const cases: [string, { hash: Buffer; length: number }[], number][] = [
    ["none of the sample", [{ hash: h("x"), length: 4096 }], 0],
    [
      "chunks of either index",
      [
        { hash: h("b"), length: 4096 },
        { hash: h("d"), length: 4096 },
      ],
      2,
    ],
    ["the same hash with another length is not held", [{ hash: h("tail"), length: 4096 }], 0],
    ["the short last chunk by its length", [{ hash: h("tail"), length: 100 }], 1],
    ["a chunk the index holds twice counts once", [{ hash: h("zero"), length: 4096 }], 1],
    [
      "a sample entry twice counts twice",
      [
        { hash: h("a"), length: 4096 },
        { hash: h("a"), length: 4096 },
      ],
      2,
    ],
  ];
  it.each(cases)("%s", (_, sample, held) => {
    expect(countHeld(sample, [one, two])).toBe(held);
  });

  it("a 48-bit prefix hit is confirmed on the whole hash", () => {
    // The indexed chunk's hash with its last byte changed: same prefix, another chunk.
    const near = Buffer.from(h("c"));
    near[31] = near[31]! ^ 0xff;
    expect(countHeld([{ hash: near, length: 4096 }], [one])).toBe(0);
  });

  it("a 24-bit prefix hit (the prefilter's) is confirmed on the 48-bit prefix and the hash", () => {
    // The indexed chunk's hash with its fourth byte changed: past the prefilter, not held.
    const near = Buffer.from(h("c"));
    near[3] = near[3]! ^ 0xff;
    expect(countHeld([{ hash: near, length: 4096 }], [one])).toBe(0);
    expect(countHeld([{ hash: h("c"), length: 4096 }], [one])).toBe(1);
  });

  it("agrees with the SeedMap over a large index", () => {
    const names = Array.from({ length: 5000 }, (_, i) => `block ${i}`);
    const big = indexOf(names);
    const map = new SeedMap();
    map.addIndex(big, 0);
    const sample = Array.from({ length: 400 }, (_, i) => ({
      hash: h(`block ${i * 25}${i % 3 === 0 ? " changed" : ""}`),
      length: 4096,
    }));
    const byMap = sample.filter((c) => map.find(c.hash, c.length) !== undefined).length;
    expect(countHeld(sample, [big])).toBe(byMap);
    // i < 200 lies in the index, and of those one in three changed.
    expect(byMap).toBe(133);
  });
});
