// The drain, watched while it runs (the loop waits for it): each new blocker reaches the
// status at once, so the Machine (and the operator's stall Event and condition) name the pod
// and its budget before any deadline; each change a watch sees is looked at, and a target
// that moved stops the drain (drain-stop.ts). Looks run one after another, never beside the
// tick's own report.
import type { Logger } from "pino";
import type { ReleaseRef } from "../api/types.js";
import { errorText } from "../errors.js";
import type { Actions } from "./act.js";
import { drainStopReason } from "./drain-stop.js";
import type { Observation } from "./observe.js";

export interface DrainWatchParts {
  log: Logger;
  actions: Pick<Actions, "drain">;
  observe: () => Promise<Observation>;
  /** Writes the status of a look, decided again as the loop decides. */
  report: (now: Observation) => Promise<unknown>;
}

export class WatchedDrain {
  /** While a drain runs: looks again (at each change a watch sees, at each new blocker). */
  private look: (() => void) | undefined;

  constructor(private readonly p: DrainWatchParts) {}

  /** A watch saw a change: looked at while a drain runs; nothing otherwise. */
  poke(): void {
    this.look?.();
  }

  async run(seen: Observation, release: ReleaseRef): Promise<void> {
    const { log } = this.p;
    const stop = new AbortController();
    let looks = Promise.resolve();
    const look = (): void => {
      looks = looks
        .then(async () => {
          if (stop.signal.aborted) return;
          const now = await this.p.observe();
          const why = drainStopReason(now.o, release);
          if (why !== undefined) {
            log.info({ why }, "stopping the drain");
            stop.abort(new Error(why));
            return;
          }
          await this.p.report(now);
        })
        .catch((e: unknown) => log.warn({ err: errorText(e) }, "look during the drain failed"));
    };
    this.look = look;
    try {
      await this.p.actions.drain(release, seen.cluster, { stop: stop.signal, blocked: look });
    } finally {
      this.look = undefined;
      await looks;
    }
  }
}
