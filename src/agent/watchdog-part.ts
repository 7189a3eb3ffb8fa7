// systemd's watchdog, fed while the agent is alive (watchdog.ts says when systemd watches).
// It is fed only while the loop comes round (or an action it awaits is running), so a wedged
// event loop or a loop that stopped turning trips systemd's WatchdogSec and the agent is
// restarted.
import { sdNotify } from "../native/index.js";
import type { SidePart } from "./side-part.js";
import { watchdogPeriodMs } from "./watchdog.js";

export class WatchdogPart implements SidePart {
  private timer: NodeJS.Timeout | undefined;

  /** @param alive whether the loop came round lately or an action is under way */
  constructor(private readonly alive: () => boolean) {}

  start(): void {
    const period = watchdogPeriodMs();
    if (period === undefined) return;
    this.timer = setInterval(() => {
      if (this.alive()) sdNotify("WATCHDOG=1");
    }, period);
  }

  stop(): Promise<void> {
    clearInterval(this.timer);
    return Promise.resolve();
  }
}
