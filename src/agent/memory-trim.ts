// When the idle agent hands its freed malloc memory back to the kernel (trimMemory, the native
// addon's malloc_trim). Start-up parses and compiles the agent's modules, opens TLS and runs
// V8's compiler threads; their memory is freed by the time the agent idles, but glibc keeps
// the freed pages inside its arenas, resident, for the life of the process. Measured in a bare
// Node 20 after loading the agent's modules: 2-3 MiB released (docs/agent.md, "Memory").
// A pure decision, so the table test covers it; the daemon calls the trim.

/** After V8's memory reducer ran its full collections (50-75 s after the start, measured). */
export const TRIM_FIRST_MS = 90_000;
/** Then at most this often, while idle: a step (a drain's client, a release check) frees more. */
export const TRIM_EVERY_MS = 10 * 60_000;

export interface TrimLook {
  /** Milliseconds since the process started. */
  uptimeMs: number;
  /** Uptime at the last trim; undefined before the first. */
  lastTrimMs: number | undefined;
  /** The tick decided to wait: no step under way. */
  idle: boolean;
}

export function trimDue(t: TrimLook): boolean {
  if (!t.idle || t.uptimeMs < TRIM_FIRST_MS) return false;
  return t.lastTrimMs === undefined || t.uptimeMs - t.lastTrimMs >= TRIM_EVERY_MS;
}
