// The faults a run suffers, drawn from its seed: a schedule of (second, kind, target). A
// violation is shrunk by removing faults from this list (shrink.ts), so each fault is one
// self-contained event; the pairs that undo one (wake, start, heal) are drawn with it.
import type { Rng } from "./rng.js";

export const FAULT_KINDS = [
  "pause-operator",
  "wake-operator",
  "kill-operator",
  "start-operator",
  "drop-watch",
  "kill-agent",
  "start-agent",
  "power-cut",
  "net-cut",
  "net-heal",
  "clock-jump",
  "retarget",
  "revert",
  "delete-machine",
  "delete-node",
  // The channel world's (world.ts with shape.channel): retarget publishes a release there, and
  // revert is a person's `liken rollout revert`.
  "recall",
  "remove-target",
  "channel-cut",
  "channel-heal",
  "stop-signing",
  "resume-signing",
  "operator-clock-ahead",
  "operator-clock-fixed",
  "unrevoke",
  // A machine's certificate lapses: its renewal was left pending (approval off, the operator
  // or signer down) until it expired. The agent must join again by itself.
  "cert-lapse",
] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];

export interface Fault {
  at: number;
  kind: FaultKind;
  /** Which copy or machine (taken modulo their count), and the fault's size. */
  target: number;
}

/** The faults that come with a later one that undoes them, and how long after. */
const UNDO: Partial<Record<FaultKind, { kind: FaultKind; after: [number, number] }>> = {
  "pause-operator": { kind: "wake-operator", after: [5, 120] },
  "kill-operator": { kind: "start-operator", after: [1, 90] },
  "kill-agent": { kind: "start-agent", after: [1, 60] },
  "net-cut": { kind: "net-heal", after: [5, 120] },
  "channel-cut": { kind: "channel-heal", after: [20, 400] },
  "stop-signing": { kind: "resume-signing", after: [60, 400] },
  "operator-clock-ahead": { kind: "operator-clock-fixed", after: [5, 200] },
};

const DRAWN: readonly FaultKind[] = [
  "pause-operator",
  "kill-operator",
  "drop-watch",
  "kill-agent",
  "power-cut",
  "power-cut",
  "net-cut",
  "clock-jump",
  "retarget",
  "revert",
  "delete-machine",
  "delete-node",
];

/** The channel world's own faults, drawn beside the others (a publish is `retarget`). */
export const CHANNEL_DRAWN: readonly FaultKind[] = [
  "retarget",
  "retarget",
  "revert",
  "recall",
  "recall",
  "remove-target",
  "channel-cut",
  "stop-signing",
  "operator-clock-ahead",
  "unrevoke",
];

/** Certificate lapses, drawn from their own stream (a seed's other faults stay as they were). */
export const IDENTITY_DRAWN: readonly FaultKind[] = ["cert-lapse"];

export function drawFaults(
  rng: Rng,
  count: number,
  until: number,
  from: readonly FaultKind[] = DRAWN,
): Fault[] {
  const out: Fault[] = [];
  for (let i = 0; i < count; i++) {
    const kind = rng.pick(from);
    const at = rng.int(1, until - 1);
    const target = rng.int(0, 1_000_000);
    out.push({ at, kind, target });
    const undo = UNDO[kind];
    if (undo !== undefined) {
      out.push({ at: Math.min(until, at + rng.int(...undo.after)), kind: undo.kind, target });
    }
  }
  return out.sort((a, b) => a.at - b.at);
}
