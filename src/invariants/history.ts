// What the invariant checker reads: a plain history of observed states and acts, each with the
// observer's timestamp (ms, on one clock for the whole history: the simulator's virtual clock,
// or the wall clock of a watcher in the lab). Nothing here is liken's own memory: an observer
// that watches the API server and the machines' consoles can produce every entry.
import type { Cluster, Machine, SlotName } from "../api/index.js";

/** A release as a machine acts on it (the digest is what every rule compares). */
export interface Rel {
  version: string;
  digest: string;
}

export type Observation =
  /** The Cluster as read (spec: budget and target; status: rebootTurns, grantedBy). */
  | { kind: "cluster"; at: number; cluster: Cluster }
  /** A Machine as read (spec.role, status.step Lost, failedReleases, version). */
  | { kind: "machine"; at: number; machine: Machine }
  | { kind: "machine-deleted"; at: number; name: string }
  /** A Node's Ready condition and bootID, as read. */
  | { kind: "node"; at: number; name: string; ready: boolean; bootId: string }
  | { kind: "node-deleted"; at: number; name: string }
  /** A Lease renewal seen (kept for the record; Lost is what the operator wrote). */
  /** A heartbeat renewal (the simulator records the first one after each Lost mark). */
  | { kind: "lease"; at: number; name: string }
  /** An operator copy started, or woke from a pause: its start-up grace begins. */
  | { kind: "operator-start"; at: number; copy: string }
  /** The agent read its turn record (machine, release) from the Cluster, in this boot. */
  | { kind: "turn-read"; at: number; machine: string; bootId: string; release: Rel }
  /** The agent began a disruption: cordon and drain (or reboot without one). */
  | { kind: "drain-start"; at: number; machine: string; bootId: string; release: Rel }
  /** A slot's bytes were written (any earlier read-back of it no longer counts). */
  | { kind: "slot-write"; at: number; machine: string; slot: SlotName; digest: string }
  /** The slot was read back and compared with the release; matched says the verdict. */
  | {
      kind: "read-back";
      at: number;
      machine: string;
      slot: SlotName;
      digest: string;
      matched: boolean;
    }
  /** The bootloader was armed to try the slot once on the next boot. */
  | { kind: "arm"; at: number; machine: string; bootId: string; slot: SlotName; release: Rel }
  /** The machine went down: the agent rebooted it, or its power was cut. */
  | { kind: "reboot"; at: number; machine: string; bootId: string; cause: "agent" | "power" }
  /** The machine booted (a new bootId) from a slot; trial: the armed boot-once entry. */
  | { kind: "boot"; at: number; machine: string; bootId: string; slot: SlotName; trial: boolean }
  /** The agent saw its Node rejoined (Ready, with this bootId). */
  | { kind: "rejoin"; at: number; machine: string; bootId: string }
  /** The agent made the trial slot the default (promotion) in this boot. */
  | { kind: "promote"; at: number; machine: string; bootId: string; release: Rel }
  /** The machine's trial of the release failed (fell back) or the release did not verify. */
  | { kind: "trial-failed"; at: number; machine: string; release: Rel }
  /** A person allowed a failed release again (liken rollout resume; empty machines: all). */
  | { kind: "say-so"; at: number; digest: string; machines: readonly string[] }
  /** The machine's certificate lapsed (its renewal pending until it expired), or it rejoined. */
  | { kind: "identity"; at: number; machine: string; event: "lapsed" | "rejoined" }
  /** Whether a machine whose certificate lapsed could join again now (power, agent, network, approver). */
  | { kind: "join-possible"; at: number; machine: string; possible: boolean }
  /** The run ended: every machine must be on the target or say why not. */
  | { kind: "end"; at: number };

export type History = readonly Observation[];

export const RULES = [
  "budget",
  "two-leaders",
  "reboot-without-turn",
  "boot-unverified-slot",
  "failed-release-retried",
  "grant-in-grace",
  "promote-without-rejoin",
  "ended-unexplained",
  "grant-withdrawn",
  "below-taken",
  "revert-dropped",
  "lost-lapsed",
] as const;
export type Rule = (typeof RULES)[number];

export interface Violation {
  rule: Rule;
  at: number;
  machine?: string;
  message: string;
}

export interface CheckSettings {
  /** The operator's start-up grace (START_GRACE_SECONDS unless the run set another). */
  startGraceMs: number;
  /**
   * The history records the first lease renewal after each Lost mark (`lease`): a machine is
   * then Lost from its mark to that renewal, as the operator counts it (by the heartbeat), not
   * for as long as its recorded step says Lost, which outlives the renewal when the writes that
   * clear it fail (seed 71702). Without it (a history of real processes that does not watch
   * Leases), Lost is read from the step.
   */
  leases?: boolean;
}
