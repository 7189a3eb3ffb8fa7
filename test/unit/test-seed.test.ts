// The replay helper for random faults: one seed, one sequence; a bad LIKEN_TEST_SEED is refused.
import { describe, expect, it } from "vitest";
import { mulberry32, seedFromEnv } from "../support/seed.js";

describe("seeded random faults", () => {
  it("replays the same draws from the same seed, and other draws from another", () => {
    const draws = (seed: number) => Array.from({ length: 5 }, mulberry32(seed));
    expect(draws(42)).toEqual(draws(42));
    expect(draws(42)).not.toEqual(draws(43));
    for (const x of draws(7)) expect(x >= 0 && x < 1).toBe(true);
  });

  it.each([
    { value: undefined, want: undefined },
    { value: "", want: undefined },
    { value: "0", want: 0 },
    { value: "4294967295", want: 4294967295 },
  ])("LIKEN_TEST_SEED=$value -> $want", ({ value, want }) => {
    expect(seedFromEnv(value === undefined ? {} : { LIKEN_TEST_SEED: value })).toBe(want);
  });

  it.each(["-1", "1.5", "abc", "4294967296"])("refuses LIKEN_TEST_SEED=%s", (value) => {
    expect(() => seedFromEnv({ LIKEN_TEST_SEED: value })).toThrow(/is not a seed/);
  });
});
