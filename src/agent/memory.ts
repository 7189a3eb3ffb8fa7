// What the agent must remember across its own restarts and reboots, in stateDir/agent.json
// (written atomically and synced, like the slot markers). Everything else is read fresh from
// the slots, the bootloader and the API each time.
import { readFile } from "node:fs/promises";
import path from "node:path";
import type { FailedRelease, SlotName, TrialRecord } from "../api/types.js";
import { FAILED_RELEASES_MAX_ITEMS } from "../api/types.js";
import { writeFileAtomic } from "../slots/atomic.js";

export interface Memory {
  /** Releases not to try again (failed trial or slot check), newest last. */
  failed: FailedRelease[];
  /** The drain finished for this digest in the turn held now (cleared when given back). */
  drainedDigest?: string;
  /** The trial armed last: which release, in which slot. */
  trial?: { version: string; digest: string; slot: SlotName; armedAt: string };
  /** When this trial boot was first seen (ms since boot, clock.ts), for the prove timeout. */
  trialSeenAt?: number;
  /** The last trial's outcome, reported in status.lastTrial until the next one. */
  lastTrial?: TrialRecord;
  /** The last `liken.sh/retry` annotation value acted on. */
  retryHandled?: string;
}

export class MemoryFile {
  readonly file: string;

  constructor(stateDir: string) {
    this.file = path.join(stateDir, "agent.json");
  }

  async load(): Promise<Memory> {
    try {
      const m = JSON.parse(await readFile(this.file, "utf8")) as Memory;
      return { ...m, failed: Array.isArray(m.failed) ? m.failed : [] };
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === "ENOENT") return { failed: [] };
      // A torn file cannot happen (atomic rename); a corrupt one must not make the agent
      // forget a failed release silently: refuse to start and say where.
      throw e;
    }
  }

  async save(m: Memory): Promise<void> {
    await writeFileAtomic(this.file, `${JSON.stringify(m, null, 1)}\n`);
  }
}

/** Adds a failed release (once per digest), keeping the newest FAILED_RELEASES_MAX_ITEMS. */
export function rememberFailed(list: FailedRelease[], f: FailedRelease): FailedRelease[] {
  const rest = list.filter((x) => x.digest !== f.digest);
  return [...rest, f].slice(-FAILED_RELEASES_MAX_ITEMS);
}
