// The turn decision's rules that mutation testing (npm run test:mutation -- decide) found no
// test for: the words of every turn release, the soak's bookkeeping, the STATUS and TURNS
// columns, the Event a brake raises once, the conditions kept side by side, when a status
// counts as changed, and a fleet with parts missing (no status, no disruption, no target).
// Each row states a rule; docs/testing.md lists the mutants left that cannot change a result.
import { describe, expect, it } from "vitest";
import type {
  Cluster,
  ClusterCondition,
  DrainTimedOut,
  Machine,
  MachineStatus,
  RebootTurn,
} from "../../src/api/index.js";
import { decide, type ChannelView } from "../../src/operator/decide/decide.js";
import {
  D2,
  D3,
  NOW,
  SETTINGS,
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
  back,
  turnEnding,
  progressing,
  withSpec,
} from "./operator-fixtures.js";

const timedOut = (over: Partial<DrainTimedOut> = {}): DrainTimedOut => ({
  version: V2,
  digest: D2,
  turnGrantedAt: GRANTED,
  at: iso(NOW, -2),
  message: "the drain did not finish within 60 s",
  ...over,
});

/** A condition another writer left in the status, listed before Progressing. */
const CHANNEL: ClusterCondition = {
  type: "ChannelReachable",
  status: "True",
  reason: "ChannelRead",
  message: "read",
  lastTransitionTime: iso(NOW, -600),
};

describe("a turn release says what ended it", () => {
  const cases: {
    name: string;
    spec?: Partial<Machine["spec"]>;
    status?: Partial<MachineStatus>;
    want: string;
  }[] = [
    {
      name: "a person resumed this stalled turn",
      spec: {
        resume: { turnGrantedAt: GRANTED, by: "ann", at: iso(NOW, -5), reason: "PDB fixed" },
      },
      status: { step: "Updating" },
      want: `Resumed: released by ann at ${iso(NOW, -5)}: PDB fixed`,
    },
    {
      name: "its drain timed out on a pod under a PodDisruptionBudget",
      status: { drainTimedOut: timedOut({ pod: "ns/web-0", podDisruptionBudget: "ns/web" }) },
      want:
        `DrainTimedOut: its drain timed out at ${iso(NOW, -2)}, held by pod ns/web-0 ` +
        "(PodDisruptionBudget ns/web); it uncordoned and goes to the back of the queue: " +
        "the drain did not finish within 60 s",
    },
    {
      name: "its drain timed out on a pod without a PodDisruptionBudget",
      status: { drainTimedOut: timedOut({ pod: "ns/web-0" }) },
      want:
        `DrainTimedOut: its drain timed out at ${iso(NOW, -2)}, held by pod ns/web-0; ` +
        "it uncordoned and goes to the back of the queue: the drain did not finish within 60 s",
    },
    {
      name: "its drain timed out without a pod named",
      status: { drainTimedOut: timedOut() },
      want:
        `DrainTimedOut: its drain timed out at ${iso(NOW, -2)}; ` +
        "it uncordoned and goes to the back of the queue: the drain did not finish within 60 s",
    },
    {
      name: "back on the turn's release and Ready",
      status: { version: V2, digest: D2, step: "Ready" },
      want: `Returned: back on ${V2} and Ready`,
    },
    {
      name: "a failed trial of another release is not this turn's rollback",
      status: { step: "Failed", lastTrial: failedTrial({ version: V3, digest: D3 }) },
      want: `GivenBack: it no longer asks for a turn for ${V2} (step Failed)`,
    },
    {
      name: "a succeeded trial is not a rollback",
      status: { step: "Ready", lastTrial: failedTrial({ result: "Succeeded" }) },
      want: `GivenBack: it no longer asks for a turn for ${V2} (step Ready)`,
    },
    {
      name: "a failed trial from before this grant, while it still asks",
      status: {
        step: "UpdatePending",
        turnRequest: { version: V2, digest: D2, at: GRANTED },
        lastTrial: failedTrial({ at: iso(NOW, -61) }),
      },
      want: "kept",
    },
    {
      name: "a request for another release gives the turn back",
      status: { step: "UpdatePending", turnRequest: { version: V3, digest: D3, at: GRANTED } },
      want: `GivenBack: it no longer asks for a turn for ${V2} (step UpdatePending)`,
    },
  ];
  it.each(cases)("$name: $want", ({ spec, status, want }) => {
    expect(turnEnding(machine("m1", { spec, status: { turnRequest: undefined, ...status } }))).toBe(
      want,
    );
  });

  it("a turn recorded without a digest is given back when the request names another version", () => {
    const m = machine("m1", {
      status: { step: "UpdatePending", turnRequest: { version: V3, digest: D3, at: GRANTED } },
    });
    const t = turn("m1", { grantedAt: GRANTED, digest: undefined });
    const d = decide(observed(cluster({ turns: [t] }), [m]), SETTINGS);
    expect(d.releases.map((r) => r.reason)).toEqual(["GivenBack"]);
  });

  it("a deleted Machine's turn is released, naming it", () => {
    const d = decide(observed(cluster({ turns: [turn("gone")] }), []), SETTINGS);
    expect(d.releases.map((r) => `${r.reason}: ${r.message}`)).toEqual([
      "MachineDeleted: Machine gone was deleted while it held a turn",
    ]);
  });
});

describe("soak: a machine back and Ready keeps its turn for spec.rollout.soakSeconds", () => {
  const soaking = (c: Cluster, seconds: number): Cluster =>
    withSpec(c, { rollout: { soakSeconds: seconds } });
  const updating = machine("m1", { status: { version: V2, digest: D2, step: "Updating" } });
  const settle = (t: RebootTurn, m: Machine, seconds = 60, silentFor?: Record<string, number>) =>
    decide(observed(soaking(cluster({ turns: [t] }), seconds), [m], { silentFor }), SETTINGS);

  it("the soak's end releases the turn, saying how long it soaked", () => {
    const d = settle(turn("m1", { returnedAt: iso(NOW, -60) }), back("m1"));
    expect(d.releases.map((r) => `${r.reason}: ${r.message}`)).toEqual([
      `Returned: back on ${V2} and Ready for 60 s (soak)`,
    ]);
  });

  it("not back yet: the turn is kept as recorded, with no soak started", () => {
    const t = turn("m1");
    const d = settle(t, updating);
    expect(d.releases).toEqual([]);
    expect(d.status.rebootTurns).toEqual([t]);
  });

  it("it left Ready during the soak: the soak starts again", () => {
    const d = settle(turn("m1", { returnedAt: iso(NOW, -30) }), updating);
    expect(d.status.rebootTurns).toEqual([turn("m1")]);
  });

  it("silent (Lost) during the soak: the soak starts again", () => {
    const d = settle(turn("m1", { returnedAt: iso(NOW, -30) }), back("m1"), 60, { m1: 600 });
    expect(d.status.rebootTurns).toEqual([turn("m1")]);
  });

  it("it left Ready during the soak and the deadline passed: the turn stalls", () => {
    const t = turn("m1", { returnedAt: iso(NOW, -30), deadline: iso(NOW, -1) });
    const d = settle(t, updating);
    expect(d.stalls.map((s) => s.turn.machine)).toEqual(["m1"]);
  });

  it("soak switched off: a record is left as it was (no soak bookkeeping without a soak)", () => {
    const t = turn("m1", { returnedAt: iso(NOW, -30) });
    expect(settle(t, updating, 0).status.rebootTurns).toEqual([t]);
  });
});

describe("what decide() reads when parts are missing", () => {
  it("a Cluster with no status yet: the first asker gets a turn, nothing is released", () => {
    const c: Cluster = { ...cluster(), status: undefined };
    const d = decide(observed(c, [asking("m1")]), SETTINGS);
    expect(d.grants.map((g) => g.machine)).toEqual(["m1"]);
    expect(d.releases).toEqual([]);
  });

  it("no spec.disruption: one machine at a time", () => {
    const c = withSpec(cluster(), { disruption: undefined });
    const d = decide(observed(c, [asking("m1"), asking("m2", { askedAfter: 1 })]), SETTINGS);
    expect(d.grants.map((g) => g.machine)).toEqual(["m1"]);
  });

  it("a Machine that reports no status yet does not stop a grant", () => {
    const fresh: Machine = { ...machine("new"), status: undefined };
    const d = decide(observed(cluster(), [fresh, asking("m1")]), SETTINGS);
    expect(d.grants.map((g) => g.machine)).toEqual(["m1"]);
  });

  it("no spec.version: a machine's drain timeout neither orders nor lists anything", () => {
    const m = asking("m1", { status: { drainTimedOut: timedOut() } });
    const d = decide(observed(cluster({ version: null }), [m]), SETTINGS);
    expect(d.grants).toEqual([]);
    expect(d.status.drainSkipped).toBeUndefined();
  });
});

describe("grants", () => {
  it("a machine that holds a turn and still asks is not given a second one", () => {
    const c = cluster({ maxUnavailable: 2, turns: [turn("m1", { grantedAt: GRANTED })] });
    const m = asking("m1", { status: { turnRequest: { version: V2, digest: D2, at: GRANTED } } });
    const d = decide(observed(c, [m]), SETTINGS);
    expect(d.grants).toEqual([]);
    expect(d.status.turns).toBe("m1");
  });

  it("the budget's block says how many are down of how many allowed", () => {
    const c = cluster({ turns: [turn("m1")] });
    const ms = [machine("m1", { status: { step: "Updating" } }), asking("m2")];
    expect(decide(observed(c, ms), SETTINGS).blocked).toEqual({
      kind: "budget",
      down: 1,
      budget: 1,
    });
  });

  it("a drain timeout for another release does not send a machine to the back", () => {
    const m1 = asking("m1", { status: { drainTimedOut: timedOut({ version: V3, digest: D3 }) } });
    const d = decide(observed(cluster(), [m1, asking("m2", { askedAfter: 100 })]), SETTINGS);
    expect(d.grants.map((g) => g.machine)).toEqual(["m1"]);
  });

  it.each([
    {
      name: "for another release",
      m: asking("m1", { status: { drainTimedOut: timedOut({ digest: D3 }) } }),
    },
    {
      name: "of a machine now on the target",
      m: machine("m1", { status: { version: V2, digest: D2, drainTimedOut: timedOut() } }),
    },
    { name: "none at all", m: asking("m1") },
  ])("status.drainSkipped is absent with no skipped machine: a timeout $name", ({ m }) => {
    expect(decide(observed(cluster(), [m]), SETTINGS).status.drainSkipped).toBeUndefined();
  });
});

describe("the STATUS and TURNS columns", () => {
  it("TURNS names every holder, comma-separated", () => {
    const c = cluster({ maxUnavailable: 2, turns: [turn("m1"), turn("m2")] });
    const ms = ["m1", "m2"].map((n) => machine(n, { status: { step: "Updating" } }));
    expect(decide(observed(c, ms), SETTINGS).status.turns).toBe("m1,m2");
  });

  it("a rollout that moves shows its phase, not its Progressing reason", () => {
    const d = decide(observed(cluster(), [asking("m1")]), SETTINGS);
    expect(progressing(d)?.reason).toBe("RolloutProgressing");
    expect(d.status.display).toBe(d.status.phase);
  });

  it("a copy in its grace shows the held reason another copy recorded", () => {
    // The other copy, past its grace, wrote ReleaseFailed after this one started: this copy
    // leaves the condition alone (progress.ts) and the STATUS column still reads it.
    const recorded: ClusterCondition = {
      type: "Progressing",
      status: "False",
      reason: "ReleaseFailed",
      message: "held by the other copy",
      lastTransitionTime: iso(NOW, -1),
    };
    const c = cluster({ status: { conditions: [CHANNEL, recorded] } });
    const d = decide(
      observed(c, [asking("m1")], { startedAt: new Date(NOW.getTime() - 10_000) }),
      SETTINGS,
    );
    expect(d.grants).toEqual([]);
    expect(progressing(d)).toEqual(recorded);
    expect(d.status.display).toBe("ReleaseFailed");
  });
});

describe("a brake raises its Event once, when it begins to hold", () => {
  const fellBack = machine("f1", {
    status: {
      step: "Failed",
      lastTrial: failedTrial({ at: iso(NOW, -30) }),
      failedReleases: [{ version: V2, digest: D2, at: iso(NOW, -30), reason: "TrialFellBack" }],
    },
  });
  const closed = withSpec(cluster(), {
    disruption: { maxUnavailable: 1, windows: [{ days: ["Sat"], start: "02:00", duration: "4h" }] },
  });
  const paused: Cluster = {
    ...withSpec(cluster({ maxUnavailable: 5 }), { rollout: { canary: { machines: 1 } } }),
    status: { rebootTurns: [], canary: { version: V2, digest: D2, machines: ["w1"] } },
  };
  const w1 = machine("w1", { status: { version: V2, digest: D2, step: "Ready" } });
  const cases: { name: string; c: Cluster; ms: Machine[]; want: string | undefined }[] = [
    {
      name: "the failure brake",
      c: cluster(),
      ms: [fellBack, asking("m1")],
      want: "ReleaseFailed",
    },
    { name: "a closed window", c: closed, ms: [asking("m1")], want: "OutsideMaintenanceWindow" },
    {
      name: "a canary that passed, waiting",
      c: paused,
      ms: [w1, asking("w2")],
      want: "CanaryPaused",
    },
    { name: "a rollout that moves", c: cluster(), ms: [asking("m1")], want: undefined },
    {
      name: "a stalled turn (its own Event, per stall)",
      c: cluster({ turns: [turn("m1", { deadline: iso(NOW, -1) })] }),
      ms: [machine("m1", { status: { step: "Updating" } }), asking("m2")],
      want: undefined,
    },
  ];
  it.each(cases)("$name: $want", ({ c, ms, want }) => {
    const d = decide(observed(c, ms), SETTINGS);
    if (want === undefined) {
      expect(d.held).toBeUndefined();
      return;
    }
    const p = progressing(d);
    expect(p?.reason).toBe(want);
    expect(d.held).toEqual({ reason: want, message: p?.message });
    // Recorded already (behind another condition): no second Event.
    const again = { ...c, status: { ...d.status, conditions: [CHANNEL, p!] } };
    expect(decide(observed(again, ms), SETTINGS).held).toBeUndefined();
  });
});

describe("the conditions written", () => {
  it("each type once: a new Progressing and a new ChannelReachable replace only their own", () => {
    const oldProgressing: ClusterCondition = {
      type: "Progressing",
      status: "True",
      reason: "StartupGrace",
      message: "old",
      lastTransitionTime: iso(NOW, -600),
    };
    const c = cluster({ status: { conditions: [oldProgressing, CHANNEL] } });
    const channel: ChannelView = {
      condition: { ...CHANNEL, message: "read again", lastTransitionTime: iso(NOW) },
      channel: { lastReadAt: iso(NOW) },
    } as ChannelView;
    const d = decide({ ...observed(c, [asking("m1")]), channel }, SETTINGS);
    expect(d.status.conditions?.map((x) => `${x.type} ${x.reason}`)).toEqual([
      "Progressing RolloutProgressing",
      "ChannelReachable ChannelRead",
    ]);
    expect(d.status.conditions?.[1]?.message).toBe("read again");
  });
});

describe("when a status counts as changed", () => {
  const ms = [machine("a", { status: { version: V2, digest: D2 } })];

  it("a number alone that differs is a change", () => {
    const first = decide(observed(cluster(), ms), SETTINGS).status;
    expect(first.observedGeneration).toBe(3);
    const before = { ...first, observedGeneration: 2 };
    expect(decide(observed({ ...cluster(), status: before }, ms), SETTINGS).changed).toBe(true);
    expect(decide(observed({ ...cluster(), status: first }, ms), SETTINGS).changed).toBe(false);
  });

  it("a null left in the recorded status (an older writer) is read, not a crash", () => {
    const first = decide(observed(cluster(), ms), SETTINGS).status;
    const before = { ...first, available: null } as unknown as typeof first;
    const d = decide(observed({ ...cluster(), status: before }, ms), SETTINGS);
    expect(d.status.available).toBeNull(); // kept as recorded: nothing else changed
    expect(d.changed).toBe(false);
  });

  it("a Cluster without a generation keeps the recorded observedGeneration", () => {
    const c = cluster({ status: { observedGeneration: 2 } });
    const noGen = { ...c, metadata: { ...c.metadata, generation: undefined } };
    expect(decide(observed(noGen, ms), SETTINGS).status.observedGeneration).toBe(2);
  });
});
