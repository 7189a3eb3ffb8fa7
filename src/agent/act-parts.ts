// What every action of the agent is given (the config, the log, the slot store, the
// bootloader, memory, the API looks it needs) and how each one runs: as a named phase that logs
// its begin and end and meters its duration, and within a deadline when the work cannot be
// cancelled. Apart from act.ts so the drain and the check-and-reboot (act-drain.ts,
// act-check.ts) run on the same parts without importing the actions.
import type { KubeConfig } from "@kubernetes/client-node";
import type { Logger } from "pino";
import type { RebootTurn, ReleaseRef } from "../api/types.js";
import type { Bootloader } from "../bootloader/types.js";
import { errorCode, errorText } from "../errors.js";
import type { SlotStore } from "../slots/store.js";
import type { AgentConfig } from "./config.js";
import type { DownloadSupervisor } from "./download.js";
import type { HealthGates } from "./health-run.js";
import type { MemoryKeeper } from "./memory.js";
import { NO_METER, type AgentMeter } from "./meter.js";
import type { Look } from "./look.js";

export interface ActionParts {
  cfg: AgentConfig;
  log: Logger;
  /** client-node's config, for the drain and uncordon: loaded on the first turn. */
  kc: () => Promise<KubeConfig>;
  store: SlotStore;
  bootloader: Bootloader;
  memory: MemoryKeeper;
  downloads: DownloadSupervisor;
  /** The health gates of a trial boot (health-run.ts). */
  health?: HealthGates;
  /** Step durations for the metrics (silent unless metrics are served). */
  meter?: AgentMeter;
  /** Reads the turn record for `release` again, fresh from the API server. */
  turnHeld: (release: ReleaseRef) => Promise<Look<RebootTurn | undefined>>;
  /** Writes the status that says why the machine goes down, right before a reboot. */
  reportRebooting: (reason: string) => Promise<void>;
  /** Aborted on SIGTERM: a drain stops, no trial is armed. */
  signal: AbortSignal;
  /** Waits, or less when the agent stops. */
  pause: (ms: number) => Promise<void>;
  /** Exits the process with `code` after every state is synced (reboot.exitCode). */
  exit: (code: number) => never;
}

/** Runs `fn` as a named phase: one log line at its begin, one at its end (or failure). */
export async function phase<T>(
  p: { log: Logger; meter?: AgentMeter },
  name: string,
  fn: () => Promise<T>,
): Promise<T> {
  const { log, meter = NO_METER } = p;
  const t = Date.now();
  log.info({ step: name }, "begin");
  try {
    const r = await fn();
    meter.step(name, Date.now() - t, true);
    log.info({ step: name, ms: Date.now() - t }, "end");
    return r;
  } catch (e) {
    meter.step(name, Date.now() - t, false);
    log.warn({ step: name, ms: Date.now() - t, err: errorText(e), code: errorCode(e) }, "failed");
    throw e;
  }
}

/** Resolves with `p`, or rejects with `onTimeout()` after `ms` (p keeps running). */
export function withDeadline<T>(p: Promise<T>, ms: number, onTimeout: () => Error): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(onTimeout()), ms);
  });
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
}
