// The turn decision at its edges, found by mutation testing (npm run test:mutation): when a
// trial's report ends a turn, when a request gives it back, the ties in the request order,
// the deadline's last second, the Lost marks' words, and when a status counts as unchanged.
import { describe, expect, it } from "vitest";
import type {
  ClusterStatus,
  Machine,
  MachineCondition,
  MachineStatus,
} from "../../src/api/index.js";
import { decide, type ChannelView } from "../../src/operator/decide/decide.js";
import {
  D1,
  D2,
  NOW,
  SETTINGS,
  V1,
  V2,
  V3,
  asking,
  cluster,
  iso,
  machine,
  observed,
  turn,
  GRANTED,
  failedTrial,
  turnEnding,
} from "./operator-fixtures.js";

describe("a turn ends on the machine's own report", () => {
  const cases: { name: string; status: Partial<MachineStatus> | undefined; want: string }[] = [
    {
      name: "its trial of the turn's release failed after the grant",
      status: { step: "Failed", lastTrial: failedTrial() },
      want: `RolledBack: its trial of ${V2} failed (TrialFellBack); it runs ${V1}`,
    },
    {
      name: "a trial reported at the very second of the grant counts",
      status: { step: "Failed", lastTrial: failedTrial({ at: GRANTED }) },
      want: `RolledBack: its trial of ${V2} failed (TrialFellBack); it runs ${V1}`,
    },
    {
      name: "a skipped trial",
      status: {
        step: "Ready",
        lastTrial: failedTrial({ result: "Skipped", reason: "SlotCheckMismatch" }),
      },
      want: `RolledBack: its trial of ${V2} was skipped (SlotCheckMismatch); it runs ${V1}`,
    },
    {
      name: "no running version reported",
      status: { version: undefined, step: "Failed", lastTrial: failedTrial() },
      want: `RolledBack: its trial of ${V2} failed (TrialFellBack); it runs its previous release`,
    },
    {
      name: "a failed trial from before this grant",
      status: {
        step: "Updating",
        updateStage: "Draining",
        lastTrial: failedTrial({ at: iso(NOW, -61) }),
      },
      want: "kept",
    },
    {
      name: "a failed trial while it still says Updating",
      status: { step: "Updating", lastTrial: failedTrial() },
      want: "kept",
    },
    {
      name: "a failed trial of another release",
      status: { step: "Updating", lastTrial: failedTrial({ version: V3 }) },
      want: "kept",
    },
    {
      name: "a succeeded trial is not a rollback",
      status: {
        step: "Updating",
        updateStage: "Proving",
        lastTrial: failedTrial({ result: "Succeeded" }),
      },
      want: "kept",
    },
    {
      name: "a request for another digest gives the turn back",
      status: { step: "UpdatePending", turnRequest: { version: V2, digest: D1, at: GRANTED } },
      want: `GivenBack: it no longer asks for a turn for ${V2} (step UpdatePending)`,
    },
    {
      name: "no request, Ready on the old release",
      status: { step: "Ready" },
      want: `GivenBack: it no longer asks for a turn for ${V2} (step Ready)`,
    },
    {
      name: "no request, but an update stage: it started",
      status: { step: "UpdatePending", updateStage: "Draining" },
      want: "kept",
    },
    {
      name: "no request, step Updating: it started",
      status: { step: "Updating" },
      want: "kept",
    },
    {
      name: "still asking for the turn's release",
      status: { step: "UpdatePending", turnRequest: { version: V2, digest: D2, at: GRANTED } },
      want: "kept",
    },
  ];
  it.each(cases)("$name: $want", ({ status, want }) => {
    expect(turnEnding(machine("m1", { status: { turnRequest: undefined, ...status } }))).toBe(want);
  });

  it("a turn recorded without a digest is still asked for by any digest of its version", () => {
    const m = machine("m1", {
      status: { step: "UpdatePending", turnRequest: { version: V2, digest: D1, at: GRANTED } },
    });
    const t = turn("m1", { grantedAt: GRANTED, digest: undefined });
    expect(decide(observed(cluster({ turns: [t] }), [m]), SETTINGS).releases).toEqual([]);
  });

  it("a machine with no status at all gives its turn back", () => {
    const m: Machine = { ...machine("m1"), status: undefined };
    const d = decide(observed(cluster({ turns: [turn("m1")] }), [m]), SETTINGS);
    expect(d.releases.map((r) => r.message)).toEqual([
      `it no longer asks for a turn for ${V2} (step none)`,
    ]);
  });
});

describe("the request order", () => {
  it.each([
    [["m2", "m1"], "m1"],
    [["m1", "m2"], "m1"],
  ])("same request time: the name decides (%j -> %s)", (names, first) => {
    const ms = names.map((n) => asking(n, { askedAfter: 3 }));
    expect(decide(observed(cluster(), ms), SETTINGS).grants.map((g) => g.machine)).toEqual([first]);
  });

  it("a request without a readable time comes last", () => {
    const ms = [
      asking("a", { status: { turnRequest: { version: V2, digest: D2, at: "not a time" } } }),
      asking("b", { askedAfter: 50 }),
    ];
    expect(decide(observed(cluster(), ms), SETTINGS).grants.map((g) => g.machine)).toEqual(["b"]);
  });
});

describe("the deadline", () => {
  const ms = [machine("m1", { status: { step: "Updating", updateStage: "Draining" } })];
  it.each([
    { name: "a second before", deadline: iso(NOW, 1), stalled: false },
    { name: "at the very second", deadline: iso(NOW), stalled: false },
    { name: "a second after", deadline: iso(NOW, -1), stalled: true },
  ])("$name: stalled $stalled", ({ deadline, stalled }) => {
    const t = turn("m1", { grantedAt: iso(NOW, -5), deadline });
    const d = decide(observed(cluster({ turns: [t] }), ms), SETTINGS);
    expect(d.stalls.length > 0).toBe(stalled);
  });

  it("a turn without a deadline gets one from its grant time", () => {
    const t = turn("m1", {
      grantedAt: iso(NOW, -SETTINGS.turnDeadlineSeconds - 1),
      deadline: undefined,
    });
    const d = decide(observed(cluster({ turns: [t] }), ms), SETTINGS);
    expect(d.stalls.map((s) => s.turn.deadline)).toEqual([iso(NOW, -1)]);
  });
});

describe("Lost marks say what happened", () => {
  it.each([
    { step: "UpdatePending" as const, was: "UpdatePending" },
    { step: undefined, was: "not yet reporting" },
  ])("silent while $step", ({ step, was }) => {
    const m = machine("m1", { status: { step } });
    const d = decide(observed(cluster(), [m], { silentFor: { m1: 41 } }), SETTINGS);
    expect(d.lostMarks).toEqual([
      {
        machine: "m1",
        resourceVersion: "rv-m1",
        lost: true,
        reason: "NoHeartbeat",
        step: "Lost",
        message: `no heartbeat (Lease m1) for ${SETTINGS.lostAfterSeconds} s; it was ${was}`,
      },
    ]);
  });

  it("back from Lost", () => {
    const m = machine("m1", { status: { step: "Lost" } });
    expect(decide(observed(cluster(), [m]), SETTINGS).lostMarks).toEqual([
      {
        machine: "m1",
        resourceVersion: "rv-m1",
        lost: false,
        reason: "HeartbeatReturned",
        step: "Ready",
        message: "its heartbeat returned; it shows Ready again",
      },
    ]);
  });
});

describe("Lost and back: the operator yields to a live agent whose heartbeat it does not see", () => {
  const alive = (status: "True" | "False", reason: string, ago = 30): MachineCondition => ({
    type: "Alive",
    status,
    reason,
    message: "",
    lastTransitionTime: iso(NOW, -ago),
  });
  const cases: {
    name: string;
    step: MachineStatus["step"];
    cond: MachineCondition | undefined;
    silent: boolean;
    want: { reason: string; step?: string } | undefined;
  }[] = [
    {
      name: "silent, never marked: Lost",
      step: "UpdatePending",
      cond: undefined,
      silent: true,
      want: { reason: "NoHeartbeat", step: "Lost" },
    },
    {
      name: "silent, Alive=True from an earlier return: Lost",
      step: "Ready",
      cond: alive("True", "HeartbeatReturned"),
      silent: true,
      want: { reason: "NoHeartbeat", step: "Lost" },
    },
    {
      name: "marked Lost and still Lost: nothing",
      step: "Lost",
      cond: alive("False", "NoHeartbeat"),
      silent: true,
      want: undefined,
    },
    {
      name: "marked Lost, the agent wrote its step back: yield, the step untouched",
      step: "UpdatePending",
      cond: alive("False", "NoHeartbeat"),
      silent: true,
      want: { reason: "HeartbeatUnseen" },
    },
    {
      name: "yielded already: no write at all",
      step: "UpdatePending",
      cond: alive("False", "HeartbeatUnseen"),
      silent: true,
      want: undefined,
    },
    {
      name: "yielded 9 min 59 s ago: still no write",
      step: "UpdatePending",
      cond: alive("False", "HeartbeatUnseen", 599),
      silent: true,
      want: undefined,
    },
    {
      name: "yielded 10 min ago: marked Lost once more (the agent may have died since)",
      step: "UpdatePending",
      cond: alive("False", "HeartbeatUnseen", 600),
      silent: true,
      want: { reason: "NoHeartbeat", step: "Lost" },
    },
    {
      name: "yielded, then a renewal seen: Alive again, the agent's step kept",
      step: "UpdatePending",
      cond: alive("False", "HeartbeatUnseen"),
      silent: false,
      want: { reason: "HeartbeatReturned" },
    },
    {
      name: "alive and never marked: nothing",
      step: "Ready",
      cond: alive("True", "HeartbeatReturned"),
      silent: false,
      want: undefined,
    },
  ];
  it.each(cases)("$name", ({ step, cond, silent, want }) => {
    const m = asking("m1", { status: { step, conditions: cond === undefined ? [] : [cond] } });
    const o = observed(cluster(), [m], silent ? { silentFor: { m1: 41 } } : {});
    const d = decide(o, SETTINGS);
    // Yielding changes nothing about the budget: a machine not seen is Lost all the same.
    if (silent) expect(d.grants).toEqual([]);
    if (want === undefined) {
      expect(d.lostMarks).toEqual([]);
      return;
    }
    expect(d.lostMarks).toHaveLength(1);
    const mark = d.lostMarks[0]!;
    expect({ reason: mark.reason, step: mark.step }).toEqual({ step: undefined, ...want });
    expect(mark.lost).toBe(silent);
  });

  it("says what to do when it yields", () => {
    const m = asking("m1", { status: { conditions: [alive("False", "NoHeartbeat")] } });
    const d = decide(observed(cluster(), [m], { silentFor: { m1: 41 } }), SETTINGS);
    const text = d.lostMarks[0]?.message ?? "";
    for (const part of [
      "its agent writes its status (step UpdatePending)",
      "liken-heartbeats/m1",
      "counts as Lost",
      "heartbeatSeconds",
      "heartbeat not renewed",
    ]) {
      expect(text).toContain(part);
    }
  });
});

describe("the status written", () => {
  const ms = [machine("a", { status: { version: V2, digest: D2 } })];

  it("records the generation it was decided on", () => {
    const c = cluster();
    expect(decide(observed(c, ms), SETTINGS).status.observedGeneration).toBe(3);
    const noGen = { ...c, metadata: { ...c.metadata, generation: undefined } };
    expect(decide(observed(noGen, ms), SETTINGS).status.observedGeneration).toBeUndefined();
  });

  it("carries the channel's view, and keeps AVAILABLE when the view has none", () => {
    const view: ChannelView = {
      available: V3,
      condition: {
        type: "ChannelReachable",
        status: "True",
        reason: "ChannelRead",
        message: "read",
        lastTransitionTime: iso(NOW),
      },
      channel: { lastReadAt: iso(NOW) },
    } as ChannelView;
    const o = { ...observed(cluster({ status: { available: V2 } }), ms), channel: view };
    const d = decide(o, SETTINGS);
    expect(d.status.available).toBe(V3);
    expect(d.status.channel).toEqual(view.channel);
    expect(d.status.conditions?.some((c) => c.type === "ChannelReachable")).toBe(true);
    const { available: _none, ...noNews } = view;
    const kept = decide({ ...o, channel: noNews as ChannelView }, SETTINGS);
    expect(kept.status.available).toBe(V2);
  });

  it("the same status with its keys in another order, or an undefined key, is unchanged", () => {
    const first = decide(observed(cluster(), ms), SETTINGS).status;
    const reversed = (v: unknown): unknown => {
      if (Array.isArray(v)) return v.map(reversed);
      if (v !== null && typeof v === "object") {
        return Object.fromEntries(
          Object.entries(v as Record<string, unknown>)
            .reverse()
            .map(([k, x]) => [k, reversed(x)]),
        );
      }
      return v;
    };
    expect(first.available).toBeUndefined();
    const status = { ...(reversed(first) as ClusterStatus), available: undefined };
    const again = decide(observed({ ...cluster(), status }, ms), SETTINGS);
    expect(again.changed).toBe(false);
    const other = decide(
      observed({ ...cluster(), status: { ...first, machines: "0/1" } }, ms),
      SETTINGS,
    );
    expect(other.changed).toBe(true);
  });
});
