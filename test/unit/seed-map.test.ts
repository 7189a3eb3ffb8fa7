// The running slot's chunk map: found by hash and length, and among copies (zero blocks) the
// one that keeps local reads contiguous.
import { describe, expect, it } from "vitest";
import { createHash } from "node:crypto";
import { SeedMap } from "../../src/slots/seed-map.js";

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
