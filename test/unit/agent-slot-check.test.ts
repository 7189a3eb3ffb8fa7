// The check-and-reboot verdict (steps.ts afterSlotCheck), table by table: a trial is armed
// only when the slot read back and matched AND the turn is still recorded AND the agent is not
// stopping; only a real mismatch reboots without the trial (and is remembered as failed); a
// look that failed changes nothing.
import { describe, expect, it } from "vitest";
import {
  DEFAULT_TIMEOUTS,
  afterSlotCheck,
  beforeDrain,
  rebootingDecision,
  timedOut,
  type SlotCheck,
  type TurnLook,
} from "../../src/agent/steps.js";
import { V2 } from "./agent-fixtures.js";

const matched: SlotCheck = { kind: "matched" };
const mismatch: SlotCheck = {
  kind: "mismatch",
  problems: ["artifact rootfs reads back as x", "y"],
};
const slotUnread: SlotCheck = { kind: "unread", code: "EIO", message: "read failed" };
const held: TurnLook = { kind: "held" };
const gone: TurnLook = { kind: "gone" };
const paused: TurnLook = { kind: "paused", message: "paused before its drain: budget full" };
const turnUnread: TurnLook = { kind: "unread", code: "LIKEN_API_FORBIDDEN", message: "403" };

describe("afterSlotCheck", () => {
  it.each([
    {
      name: "matched, turn held",
      check: matched,
      turn: held,
      stopping: false,
      want: { kind: "arm", why: `trial of ${V2.version} in slot b` },
    },
    {
      name: "mismatch, turn held",
      check: mismatch,
      turn: held,
      stopping: false,
      want: {
        kind: "skip-trial",
        why: `slot b does not match the staged release ${V2.version}: artifact rootfs reads back as x; y`,
      },
    },
    {
      name: "slot unread",
      check: slotUnread,
      turn: held,
      stopping: false,
      want: { kind: "retry", code: "EIO", why: "cannot read slot b back: read failed" },
    },
    {
      name: "matched, turn unread",
      check: matched,
      turn: turnUnread,
      stopping: false,
      want: { kind: "retry", code: "LIKEN_API_FORBIDDEN", why: "cannot read the turn: 403" },
    },
    {
      name: "mismatch, turn unread",
      check: mismatch,
      turn: turnUnread,
      stopping: false,
      want: { kind: "retry", code: "LIKEN_API_FORBIDDEN", why: "cannot read the turn: 403" },
    },
    {
      name: "matched, turn gone",
      check: matched,
      turn: gone,
      stopping: false,
      want: { kind: "stand-down", why: "the turn is no longer recorded" },
    },
    {
      name: "mismatch, turn gone",
      check: mismatch,
      turn: gone,
      stopping: false,
      want: { kind: "stand-down", why: "the turn is no longer recorded" },
    },
    {
      name: "matched, stopping",
      check: matched,
      turn: held,
      stopping: true,
      want: { kind: "stand-down", why: "the agent is stopping" },
    },
    {
      name: "stopping wins over an unread turn",
      check: matched,
      turn: turnUnread,
      stopping: true,
      want: { kind: "stand-down", why: "the agent is stopping" },
    },
  ])("$name -> $want.kind", ({ check, turn, stopping, want }) => {
    expect(afterSlotCheck(check, turn, stopping, "b", V2)).toEqual(want);
  });

  it("never arms unless the slot matched", () => {
    for (const check of [mismatch, slotUnread]) {
      for (const turn of [held, gone, turnUnread]) {
        for (const stopping of [false, true]) {
          expect(afterSlotCheck(check, turn, stopping, "b", V2).kind).not.toBe("arm");
        }
      }
    }
  });
});

describe("rebootingDecision", () => {
  it("says Updating, stage Rebooting, still holding the turn, and why", () => {
    expect(rebootingDecision("trial of x")).toMatchObject({
      step: "Updating",
      stage: "Rebooting",
      wantsTurn: true,
      action: { kind: "reboot", reason: "trial of x" },
      why: "trial of x",
    });
  });
});

describe("the named timeouts", () => {
  it("are the numbers steps.ts explains", () => {
    expect(DEFAULT_TIMEOUTS).toEqual({
      downloadMs: 600_000,
      downloadRetryMs: 60_000,
      drainMs: 3_600_000,
      slotCheckMs: 600_000,
      rebootMs: 600_000,
      proveMs: 900_000,
    });
  });

  it.each([
    { phase: "Draining" as const, since: 0, now: 3_599_999, want: false },
    { phase: "Draining" as const, since: 0, now: 3_600_000, want: true },
    { phase: "Draining" as const, since: undefined, now: 9e9, want: false },
    { phase: "AwaitingTurn" as const, since: 0, now: 9e9, want: false },
  ])("$phase since $since, now $now: timed out $want", ({ phase, since, now, want }) => {
    expect(timedOut(phase, since, now, DEFAULT_TIMEOUTS)).toBe(want);
  });
});

describe("beforeDrain: the turn read again right before the drain", () => {
  it.each([
    { turn: held, stopping: false, want: { kind: "drain" } },
    {
      turn: gone,
      stopping: false,
      want: { kind: "stand-down", why: "the turn is no longer recorded (taken back): no drain" },
    },
    {
      turn: turnUnread,
      stopping: false,
      want: {
        kind: "stand-down",
        why: "cannot read the turn again (LIKEN_API_FORBIDDEN): 403; no drain until it reads",
      },
    },
    { turn: held, stopping: true, want: { kind: "stand-down", why: "the agent is stopping" } },
    {
      turn: paused,
      stopping: false,
      want: {
        kind: "stand-down",
        why: "the turn is paused before its drain: budget full: no drain",
      },
    },
  ])("$turn.kind, stopping $stopping: $want.kind", ({ turn, stopping, want }) => {
    expect(beforeDrain(turn, stopping, false)).toEqual(want);
  });

  it("a drain begun before the pause goes on (the node is down already)", () => {
    expect(beforeDrain(paused, false, true)).toEqual({ kind: "drain" });
    expect(beforeDrain(paused, false, false).kind).toBe("stand-down");
  });
});
