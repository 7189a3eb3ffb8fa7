// What the torture's faults act on and report to (faults.ts's FaultInjector and the fault
// families beside it: process-faults.ts, release-faults.ts, identity-faults.ts): the lab, the
// fleet's processes and relays, the releases a fault may make the target, and the run's record.
// A module of its own so that each family can take it without importing the injector.
import type { MachineStep } from "../api/types.js";
import type { Observation } from "../invariants/index.js";
import type { Lab } from "../lab/lab.js";
import type { Fleet } from "../lab/processes.js";
import type { LabRelease } from "../lab/releases.js";
import type { Relay } from "./relay.js";
import type { SignedChannel } from "./channel.js";

export interface FaultTargets {
  lab: Lab;
  fleet: Fleet;
  /** Each machine's relay to the API server. */
  relays: Map<string, Relay>;
  /** A machine's step as the watcher last saw it. */
  stepOf: (machine: string) => MachineStep | undefined;
  /** What the runner itself did that the checker must know (power cuts, operator starts). */
  record: (o: Observation) => void;
  log: (line: string) => void;
  /**
   * Built before the target is set: a newer good release (retarget), one that panics (its
   * revertFloor the lab's first release), and the fix a publisher ships after a recall.
   */
  releases: { next: LabRelease; bad: LabRelease; fix: LabRelease };
  /** The good target the fleet must end on: a retarget, a recall's fix move it. */
  target: LabRelease;
  /** Set when the Cluster follows the signed channel (a run that drew a recall). */
  channel?: { signed: SignedChannel; intervalMs: number };
  /** How long a revert has to bring every machine back (the run's convergence time). */
  revertEndMs: number;
}

/** How often a bad release's fault reads the Cluster to see whether the fleet stopped it. */
export const STOPPED_POLL_MS = 500;
