// The verdicts inside the agent's actions, pure like decide(): the status written right before
// a reboot, whether to drain on the turn read again fresh (beforeDrain), and what to do after
// the staged slot was read back (afterSlotCheck). The actions (act.ts) gather the looks and
// follow the verdict; the simulator runs the same verdicts.
import type { Slot } from "../bootloader/types.js";
import type { RebootTurn, ReleaseRef } from "../api/types.js";
import { d, type Decision } from "./decision.js";
import type { Look } from "./look.js";

/**
 * The status written right before a reboot that check-and-reboot decided (armed, or without the
 * trial after a mismatch): the watcher sees why the machine went down while the turn is held.
 */
export function rebootingDecision(reason: string): Decision {
  return d("Rebooting", "Updating", { kind: "reboot", reason }, reason, {
    stage: "Rebooting",
    wantsTurn: true,
  });
}

/** What reading the staged slot back found (slots/check.ts), or why it could not look. */
export type SlotCheck =
  | { kind: "matched" }
  | { kind: "mismatch"; problems: readonly string[] }
  /** The look failed (EIO, the slot not staged, the deadline): says nothing of the bytes. */
  | { kind: "unread"; code: string | undefined; message: string };

/** The turn record, read again right before draining and right before arming. */
export type TurnLook =
  | { kind: "held" }
  /** Held, but paused before its drain (the budget filled since the grant). */
  | { kind: "paused"; message: string }
  | { kind: "gone" }
  | { kind: "unread"; code: string | undefined; message: string };

export type DrainVerdict =
  /** The turn is held: cordon and drain. */
  | { kind: "drain" }
  /** Not held (taken back, reason Overtaken), or unread: no drain; the next look decides. */
  | { kind: "stand-down"; why: string };

/**
 * Right before the drain, on the turn read again fresh: the look that chose the drain may be
 * older than the operator taking the turn back (it does so only while the machine has not
 * started: docs/operator.md, "Overtaken"). A drain without a turn would take a machine down
 * that no budget counts; an unread turn is no licence either.
 */
export function beforeDrain(turn: TurnLook, stopping: boolean, begun: boolean): DrainVerdict {
  if (stopping) return { kind: "stand-down", why: "the agent is stopping" };
  switch (turn.kind) {
    case "held":
      return { kind: "drain" };
    case "paused":
      // A drain begun before the pause goes on: the node is down already, and a half-drained
      // node serves nobody. One not begun waits (operator turns/paused.ts).
      if (begun) return { kind: "drain" };
      return { kind: "stand-down", why: `the turn is ${turn.message}: no drain` };
    case "gone":
      return { kind: "stand-down", why: "the turn is no longer recorded (taken back): no drain" };
    case "unread":
      return {
        kind: "stand-down",
        why: `cannot read the turn again (${turn.code ?? "no code"}): ${turn.message}; no drain until it reads`,
      };
    default: {
      const never: never = turn;
      throw new Error(`unknown turn look ${JSON.stringify(never)}`);
    }
  }
}

export type CheckVerdict =
  /** The slot matched and the turn is held: record the trial, arm it, reboot. */
  | { kind: "arm"; why: string }
  /** The slot does not match: remember the release as failed, reboot without the trial. */
  | { kind: "skip-trial"; why: string }
  /** Could not look (slot or turn): change nothing; the next tick decides again. */
  | { kind: "retry"; code: string | undefined; why: string }
  /** Stopping, or the turn is no longer recorded: no reboot. */
  | { kind: "stand-down"; why: string };

/**
 * The check-and-reboot decision, after the slot was read back and the turn read again. Only a
 * real mismatch is remembered as a failed release: an I/O error or a timeout is not a verdict
 * on the release, and remembering it would skip a good release's trial for good.
 */
export function afterSlotCheck(
  check: SlotCheck,
  turn: TurnLook,
  stopping: boolean,
  slot: Slot,
  release: ReleaseRef,
): CheckVerdict {
  if (stopping) return { kind: "stand-down", why: "the agent is stopping" };
  if (turn.kind === "unread") {
    return { kind: "retry", code: turn.code, why: `cannot read the turn: ${turn.message}` };
  }
  if (turn.kind === "gone") {
    return { kind: "stand-down", why: "the turn is no longer recorded" };
  }
  // A paused turn still counts as held here: the slot check comes after the drain, and a
  // drained machine goes on (the pause only stops a drain that did not begin).
  switch (check.kind) {
    case "matched":
      return { kind: "arm", why: `trial of ${release.version} in slot ${slot}` };
    case "mismatch": {
      const why =
        `slot ${slot} does not match the staged release ${release.version}: ` +
        check.problems.join("; ");
      return { kind: "skip-trial", why };
    }
    case "unread":
      return {
        kind: "retry",
        code: check.code,
        why: `cannot read slot ${slot} back: ${check.message}`,
      };
    default: {
      const never: never = check;
      throw new Error(`unknown slot check ${JSON.stringify(never)}`);
    }
  }
}

/** A fresh read of the turn record as the verdicts take it. */
export function toTurnLook(l: Look<RebootTurn | undefined>): TurnLook {
  if (l.ok) return turnLookOf(l.value);
  return { kind: "unread", code: l.error.code, message: l.error.message };
}

/** The turn record (or its absence) as the verdicts take it. */
export function turnLookOf(t: RebootTurn | undefined): TurnLook {
  if (t === undefined) return { kind: "gone" };
  if (t.drainPause !== undefined) return { kind: "paused", message: t.drainPause.message };
  return { kind: "held" };
}
