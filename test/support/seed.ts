// Random faults that can be replayed. A test that draws a delay, a downtime or a kill point
// takes its numbers from seeded(): the seed comes from LIKEN_TEST_SEED when set, otherwise
// from the test's own default (or a fresh random one), and is printed either way, so a run
// that failed is replayed with `LIKEN_TEST_SEED=<seed> npx vitest run ...`.
//
// The generator is mulberry32 (32-bit state, passes the usual statistical batteries for this
// use): a few lines, no dependency, the same numbers on every Node version.

export const SEED_ENV = "LIKEN_TEST_SEED";

export interface Seeded {
  seed: number;
  /** A number in [0, 1), like Math.random. */
  random: () => number;
}

/** The seed from LIKEN_TEST_SEED, or undefined when unset; refuses a value that is no seed. */
export function seedFromEnv(env: NodeJS.ProcessEnv = process.env): number | undefined {
  const text = env[SEED_ENV];
  if (text === undefined || text === "") return undefined;
  if (!/^\d+$/.test(text) || Number(text) > 0xffffffff) {
    throw new Error(
      `${SEED_ENV}=${JSON.stringify(text)} is not a seed: give an integer from 0 to 4294967295, as a test printed it`,
    );
  }
  return Number(text);
}

/** A generator for `label`, its seed printed so the run can be replayed. */
export function seeded(label: string, fallback?: number): Seeded {
  const seed = seedFromEnv() ?? fallback ?? Math.floor(Math.random() * 2 ** 32);
  console.log(`${label}: seed ${seed} (replay with ${SEED_ENV}=${seed})`);
  return { seed, random: mulberry32(seed) };
}

export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
}
