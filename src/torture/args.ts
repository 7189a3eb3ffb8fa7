// `npm run torture` arguments, checked: a bad value says what was wrong and what to pass.
import { LikenError } from "../errors.js";

export interface TortureArgs {
  runs: number;
  /** The first run's seed; run i uses seed + i. */
  seed: number;
  machines: number;
  durationMs: number;
  /**
   * The signer's certificate lifetime for the run (`--cert-seconds`); given, each run also
   * draws one `cert-lapse`. Absent: the lab's 5 minutes, and no lapse.
   */
  certSeconds?: number;
}

/** The fleet: 5-10 real agents (fewer fit a short slice; more do not fit 2 cores). */
export const MACHINES = { min: 2, max: 10 } as const;
/**
 * Certificate lifetimes a lapse fits in: at least 30 s (a renewal at 70-90 % of it must have
 * time to be filed and approved), at most the lab's own 300 s.
 */
export const CERT_SECONDS = { min: 30, max: 300 } as const;
/** Seconds of fault window: long enough for one turn, short enough to converge in minutes. */
export const DURATION_S = { min: 10, max: 900 } as const;

function int(name: string, raw: string, lo: number, hi: number): number {
  const n = Number(raw);
  if (!/^\d+$/.test(raw) || n < lo || n > hi) {
    throw new LikenError(
      "LIKEN_TORTURE_USAGE",
      `--${name} ${JSON.stringify(raw)} is not a whole number from ${lo} to ${hi}; e.g. npm run torture -- --runs 3 --seed 7 --machines 5 --duration 90`,
    );
  }
  return n;
}

export function parseTortureArgs(v: {
  runs: string;
  seed: string;
  machines: string;
  duration: string;
  "cert-seconds"?: string | undefined;
}): TortureArgs {
  const cert = v["cert-seconds"];
  return {
    ...(cert === undefined
      ? {}
      : { certSeconds: int("cert-seconds", cert, CERT_SECONDS.min, CERT_SECONDS.max) }),
    runs: int("runs", v.runs, 1, 100_000),
    seed: int("seed", v.seed, 0, 2 ** 32 - 1),
    machines: int("machines", v.machines, MACHINES.min, MACHINES.max),
    durationMs: int("duration", v.duration, DURATION_S.min, DURATION_S.max) * 1000,
  };
}
