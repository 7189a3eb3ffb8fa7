// A part of the agent that runs beside its loop (daemon.ts): started with run(), stopped when
// the agent stops, and asked what it adds to each status the loop writes and whether it has
// news after each action. The daemon holds its side parts in one list and treats each the same
// way: a new one is a module that implements SidePart, added to that list.
import type { MachineStatus } from "../api/types.js";
import type { Observation } from "./observe.js";
import type { StatusExtras } from "./status.js";
import type { Action } from "./steps.js";

export interface SidePart {
  /** With run(), before systemd hears READY: begins what the part runs (a loop, a timer). */
  start(): void;
  /**
   * What the part adds to the status about to be written. `base` makes the status as it is
   * without the shares of this part and of those after it in the list.
   */
  status?(seen: Observation, base: () => MachineStatus): Promise<Partial<StatusExtras>>;
  /** After the tick's action: true when it has news that a status written at once must carry. */
  afterAction?(seen: Observation, done: Action): Promise<boolean>;
  /** When run() ends (the agent stops): ends what the part runs and waits for it. */
  stop(): Promise<void>;
}
