// The brakes on top of the page's turn rules, through decide(): the failure brake
// (spec.rollout.maxFailedTrials), maintenance windows (spec.disruption.windows) and soak
// (spec.rollout.soakSeconds). Window arithmetic has its own table in operator-windows.test.ts.
import { describe, expect, it } from "vitest";
import type { Cluster, Machine, TrialRecord } from "../../src/api/index.js";
import { brakeOf } from "../../src/operator/turns/brake.js";
import { decide } from "../../src/operator/decide/decide.js";
import {
  D1,
  D2,
  D3,
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
  failedTrial,
  back,
  progressing,
  withSpec,
} from "./operator-fixtures.js";

/** The fixtures' failed trial, 30 s ago, with the message the agent writes. */
const fallenBack = (over: Partial<TrialRecord> = {}): TrialRecord =>
  failedTrial({ at: iso(NOW, -30), message: "the bootloader booted slot a", ...over });

/** A machine that tried V2, fell back to V1 and will not retry it. */
const fellBack = (name: string, over: Partial<TrialRecord> = {}): Machine =>
  machine(name, {
    status: {
      step: "Failed",
      lastTrial: fallenBack(over),
      failedReleases: [
        {
          version: V2,
          digest: over.digest ?? D2,
          at: iso(NOW, -30),
          reason: over.reason ?? "TrialFellBack",
        },
      ],
    },
  });

const withRollout = (c: Cluster, rollout: Cluster["spec"]["rollout"]): Cluster =>
  withSpec(c, { rollout });

/** A Cluster where ann resumed the failed release (version, digest) accepting m1's failure. */
const resumedFor = (version: string, digest: string): Cluster =>
  withRollout(cluster(), {
    failedReleaseResume: { version, digest, machines: ["m1"], by: "ann", at: iso(NOW, -1) },
  });

describe("failure brake: which trials count", () => {
  const target = { version: V2, digest: D2 };
  const cases: { name: string; c?: Cluster; ms: Machine[]; failed: string[]; held: boolean }[] = [
    { name: "no failure", ms: [asking("m1")], failed: [], held: false },
    { name: "a fallen-back trial of the target", ms: [fellBack("m1")], failed: ["m1"], held: true },
    {
      name: "a skipped trial (slot check mismatch) counts",
      ms: [fellBack("m1", { result: "Skipped", reason: "SlotCheckMismatch" })],
      failed: ["m1"],
      held: true,
    },
    {
      name: "a succeeded trial does not",
      ms: [
        machine("m1", {
          status: {
            version: V2,
            lastTrial: fallenBack({ result: "Succeeded", reason: "Promoted" }),
          },
        }),
      ],
      failed: [],
      held: false,
    },
    {
      name: "a failure of another release does not (a retarget starts afresh)",
      ms: [fellBack("m1", { version: V3, digest: D3 })],
      failed: [],
      held: false,
    },
    {
      name: "the same version with another digest does not",
      ms: [fellBack("m1", { digest: D1 })],
      failed: [],
      held: false,
    },
    {
      name: "failedReleases alone counts (its lastTrial was overwritten)",
      ms: [
        machine("m1", {
          status: {
            failedReleases: [
              { version: V2, digest: D2, at: iso(NOW, -5), reason: "HealthCheckFailed" },
            ],
          },
        }),
      ],
      failed: ["m1"],
      held: true,
    },
    {
      name: "maxFailedTrials 2: one failure does not hold",
      c: withRollout(cluster(), { maxFailedTrials: 2 }),
      ms: [fellBack("m1"), asking("m2")],
      failed: ["m1"],
      held: false,
    },
    {
      name: "maxFailedTrials 2: two failures hold",
      c: withRollout(cluster(), { maxFailedTrials: 2 }),
      ms: [fellBack("m1"), fellBack("m2")],
      failed: ["m1", "m2"],
      held: true,
    },
    {
      name: "maxFailedTrials 0: the brake is off",
      c: withRollout(cluster(), { maxFailedTrials: 0 }),
      ms: [fellBack("m1"), fellBack("m2")],
      failed: ["m1", "m2"],
      held: false,
    },
    {
      name: "a resume accepts the failures it names, for this release",
      c: resumedFor(V2, D2),
      ms: [fellBack("m1"), asking("m2")],
      failed: ["m1"],
      held: false,
    },
    {
      name: "a failure after the resume holds again",
      c: resumedFor(V2, D2),
      ms: [fellBack("m1"), fellBack("m2")],
      failed: ["m1", "m2"],
      held: true,
    },
    {
      name: "a resume for another release accepts nothing",
      c: resumedFor(V3, D3),
      ms: [fellBack("m1")],
      failed: ["m1"],
      held: true,
    },
  ];
  it.each(cases)("$name", ({ c, ms, failed, held }) => {
    const b = brakeOf(c ?? cluster(), ms, target);
    expect(b.failed.map((f) => f.machine)).toEqual(failed);
    expect(b.held).toBe(held);
  });

  it("no target: nothing counts", () => {
    expect(brakeOf(cluster({ version: null }), [fellBack("m1")], undefined).held).toBe(false);
  });
});

describe("failure brake in decide", () => {
  it("one failed trial: no further turn, Progressing False ReleaseFailed naming the machine and both ways on", () => {
    const d = decide(
      observed(cluster({ maxUnavailable: 3 }), [fellBack("m1"), asking("m2"), asking("m3")]),
      SETTINGS,
    );
    expect(d.grants).toEqual([]);
    expect(d.blocked?.kind).toBe("failed-release");
    const p = progressing(d);
    expect(p?.status).toBe("False");
    expect(p?.reason).toBe("ReleaseFailed");
    expect(p?.message).toContain("m1 (TrialFellBack: the bootloader booted slot a");
    expect(p?.message).toContain("set spec.version to another release");
    expect(p?.message).toContain("liken rollout resume lab --failed-release");
    expect(d.status.display).toBe("ReleaseFailed");
    expect(d.status.phase).toBe("Updating");
  });

  it("shows even when nobody asks for a turn", () => {
    const p = progressing(decide(observed(cluster(), [fellBack("m1")]), SETTINGS));
    expect(p?.reason).toBe("ReleaseFailed");
  });

  it("a turn already granted is kept (it finishes)", () => {
    const d = decide(
      observed(cluster({ maxUnavailable: 3, turns: [turn("m2")] }), [
        fellBack("m1"),
        asking("m2", { status: { step: "Updating", updateStage: "Draining" } }),
        asking("m3"),
      ]),
      SETTINGS,
    );
    expect(d.status.rebootTurns?.map((t) => t.machine)).toEqual(["m2"]);
    expect(d.grants).toEqual([]);
  });

  it("a new spec.version clears it: machines that staged the new target get turns", () => {
    const v3Asking = asking("m2", {
      status: {
        staged: { version: V3, digest: D3, slot: "b", at: iso(NOW, -10) },
        turnRequest: { version: V3, digest: D3, at: iso(NOW, -5) },
      },
    });
    const d = decide(observed(cluster({ version: V3 }), [fellBack("m1"), v3Asking]), SETTINGS);
    expect(d.grants.map((g) => g.machine)).toEqual(["m2"]);
    expect(progressing(d)?.reason).toBe("RolloutProgressing");
  });

  it("a stall outranks it in the condition", () => {
    const stalled = turn("m2", { stalledAt: iso(NOW, -1) });
    const d = decide(
      observed(cluster({ turns: [stalled] }), [fellBack("m1"), asking("m2")]),
      SETTINGS,
    );
    expect(progressing(d)?.reason).toBe("RolloutStalled");
    expect(d.status.display).toBe("RolloutStalled");
  });

  it("a complete rollout is complete, whatever failed on the way", () => {
    const ok = machine("m1", { status: { version: V2, digest: D2, lastTrial: fallenBack() } });
    expect(progressing(decide(observed(cluster(), [ok]), SETTINGS))?.reason).toBe(
      "RolloutComplete",
    );
  });
});

describe("failure brake: a release no machine proved goes to few at a time", () => {
  // Budget 3 and four machines asking: without the limit all three slots would go at once.
  const four = (): Machine[] =>
    ["m1", "m2", "m3", "m4"].map((n, i) => asking(n, { askedAfter: i }));
  const onTrial = (name: string): Machine =>
    asking(name, {
      status: { version: V2, digest: D2, step: "Updating", updateStage: "Proving" },
    });
  const promoted = (name: string): Machine =>
    machine(name, { status: { version: V2, digest: D2, step: "Ready" } });
  const cases: {
    name: string;
    rollout?: Cluster["spec"]["rollout"];
    turns?: string[];
    ms: Machine[];
    want: string[];
    blocked?: string;
  }[] = [
    {
      name: "default maxFailedTrials 1: one trial at a time though the budget is 3",
      ms: four(),
      want: ["m1"],
      blocked: "first-trial",
    },
    {
      name: "a trial in flight counts: none more while it is under way",
      turns: ["m0"],
      ms: [onTrial("m0"), ...four()],
      want: [],
      blocked: "first-trial",
    },
    {
      name: "maxFailedTrials 3 with one failed: two at a time",
      rollout: { maxFailedTrials: 3 },
      ms: [fellBack("f1"), ...four()],
      want: ["m1", "m2"],
      blocked: "first-trial",
    },
    {
      name: "maxFailedTrials 3, one failed, one in flight: one more",
      rollout: { maxFailedTrials: 3 },
      turns: ["m0"],
      ms: [fellBack("f1"), onTrial("m0"), ...four()],
      want: ["m1"],
      blocked: "first-trial",
    },
    {
      name: "a failure a person accepted does not count (resume): one at a time again",
      rollout: {
        failedReleaseResume: {
          version: V2,
          digest: D2,
          machines: ["f1"],
          by: "ann",
          at: iso(NOW, -1),
        },
      },
      ms: [fellBack("f1"), ...four()],
      want: ["m1"],
      blocked: "first-trial",
    },
    {
      name: "proven (a machine runs it and is Ready): the budget applies as before",
      ms: [promoted("p1"), ...four()],
      want: ["m1", "m2", "m3"],
      blocked: "budget",
    },
    {
      name: "proven by a succeeded trial of exactly the target",
      ms: [
        machine("p1", {
          status: {
            step: "Lost",
            lastTrial: fallenBack({ result: "Succeeded", reason: "Promoted" }),
          },
        }),
        ...four(),
      ],
      want: ["m1", "m2", "m3"],
      blocked: "budget",
    },
    {
      name: "a trial boot not yet promoted proves nothing",
      turns: ["m0"],
      ms: [onTrial("m0"), ...four()],
      want: [],
      blocked: "first-trial",
    },
    {
      name: "the same version with another digest proves nothing",
      ms: [machine("p1", { status: { version: V2, digest: D3, step: "Ready" } }), ...four()],
      want: ["m1"],
      blocked: "first-trial",
    },
    {
      name: "maxFailedTrials 0 (brake off): the budget alone, as before",
      rollout: { maxFailedTrials: 0 },
      ms: four(),
      want: ["m1", "m2", "m3"],
      blocked: "budget",
    },
  ];
  it.each(cases)("$name", ({ rollout, turns, ms, want, blocked }) => {
    const c = withRollout(
      cluster({ maxUnavailable: 3, turns: (turns ?? []).map((t) => turn(t)) }),
      rollout,
    );
    const d = decide(observed(c, ms), SETTINGS);
    expect(d.grants.map((g) => g.machine)).toEqual(want);
    expect(d.blocked?.kind).toBe(blocked);
  });

  it("a leader waiting for the leader on trial is told so: the leader rule comes first", () => {
    const c = cluster({ maxUnavailable: 3, turns: [turn("l0", { leader: true })] });
    const l0 = onTrial("l0");
    const ms = [
      { ...l0, spec: { ...l0.spec, role: "Leader" as const } },
      asking("l1", { spec: { role: "Leader" } }),
    ];
    const d = decide(observed(c, ms), SETTINGS);
    expect(d.grants).toEqual([]);
    expect(d.blocked).toEqual({ kind: "leader", machine: "l1", down: "l0" });
  });

  it("budget 1: the budget is what holds, the messages stay as they were", () => {
    const d = decide(
      observed(cluster({ turns: [turn("m0")] }), [onTrial("m0"), ...four()]),
      SETTINGS,
    );
    expect(d.blocked?.kind).toBe("budget");
    expect(progressing(d)?.reason).toBe("RolloutProgressing");
  });

  it("says so: Progressing True AwaitingFirstTrial naming the trial, STATUS stays Updating, one Event", () => {
    const d = decide(observed(cluster({ maxUnavailable: 3 }), four()), SETTINGS);
    const p = progressing(d);
    expect(p?.status).toBe("True");
    expect(p?.reason).toBe("AwaitingFirstTrial");
    expect(p?.message).toContain(`waiting for the first trial of ${V2} (m1)`);
    expect(p?.message).toContain(
      "at most 1 machine(s) try it at a time (spec.rollout.maxFailedTrials 1)",
    );
    expect(p?.message).toContain("3 machine(s) staged it and wait");
    expect(d.status.display).toBe("Updating");
    expect(d.held?.reason).toBe("AwaitingFirstTrial");
    // The next decision, with m1's turn recorded and the condition written: no second Event.
    const c2 = cluster({
      maxUnavailable: 3,
      turns: d.grants,
      status: { conditions: d.status.conditions ?? [] },
    });
    const ms2 = [onTrial("m1"), ...four().slice(1)];
    const d2 = decide(
      observed({ ...c2, status: { ...c2.status, rebootTurns: d.grants } }, ms2),
      SETTINGS,
    );
    expect(d2.grants).toEqual([]);
    expect(progressing(d2)?.reason).toBe("AwaitingFirstTrial");
    expect(d2.held).toBeUndefined();
  });
});

describe("maintenance windows in decide", () => {
  // NOW is Wednesday 2026-12-02 10:05 UTC.
  const withWindows = (
    c: Cluster,
    windows: NonNullable<Cluster["spec"]["disruption"]>["windows"],
  ): Cluster => ({
    ...c,
    spec: { ...c.spec, disruption: { ...c.spec.disruption, windows } },
  });

  it("outside every window: no grant, True OutsideMaintenanceWindow with the next opening", () => {
    const c = withWindows(cluster(), [
      { days: ["Sat"], start: "02:00", duration: "4h", timeZone: "Europe/Berlin" },
    ]);
    const d = decide(observed(c, [asking("m1")]), SETTINGS);
    expect(d.grants).toEqual([]);
    const p = progressing(d);
    expect(p?.reason).toBe("OutsideMaintenanceWindow");
    expect(p?.status).toBe("True");
    expect(p?.message).toContain("Sat 02:00 Europe/Berlin (2026-12-05T01:00:00Z)");
    expect(p?.message).toContain("1 machine(s) staged");
    expect(d.status.display).toBe("OutsideMaintenanceWindow");
  });

  it("inside a window: granted", () => {
    const c = withWindows(cluster(), [{ days: ["Wed"], start: "10:00", duration: "30m" }]);
    expect(decide(observed(c, [asking("m1")]), SETTINGS).grants.map((g) => g.machine)).toEqual([
      "m1",
    ]);
  });

  it("a turn granted before the window closed is kept", () => {
    const c = withWindows(cluster({ turns: [turn("m1")] }), [
      { days: ["Sat"], start: "02:00", duration: "4h" },
    ]);
    const d = decide(observed(c, [asking("m1", { status: { step: "Updating" } })]), SETTINGS);
    expect(d.status.rebootTurns?.map((t) => t.machine)).toEqual(["m1"]);
  });

  it("nobody staged yet: the rollout is progressing (downloads), not held by the window", () => {
    const c = withWindows(cluster(), [{ days: ["Sat"], start: "02:00", duration: "4h" }]);
    const downloading = machine("m1", { status: { step: "Downloading" } });
    expect(progressing(decide(observed(c, [downloading]), SETTINGS))?.reason).toBe(
      "RolloutProgressing",
    );
  });

  it("an unknown time zone: SpecValid False UnknownTimeZone, and the window never opens", () => {
    const c = withWindows(cluster(), [
      { days: ["Wed"], start: "10:00", duration: "1h", timeZone: "Mars/Base" },
    ]);
    const d = decide(observed(c, [asking("m1")]), SETTINGS);
    expect(d.grants).toEqual([]);
    const v = d.status.conditions?.find((x) => x.type === "SpecValid");
    expect(v?.status).toBe("False");
    expect(v?.reason).toBe("UnknownTimeZone");
    expect(v?.message).toContain('spec.disruption.windows[0]: time zone "Mars/Base"');
    expect(progressing(d)?.message).toContain("see the SpecValid condition");
    // The STATUS column says so, not Pending or Updating (issue 42, item 5).
    expect(d.status.display).toBe("SpecInvalid");
  });

  it("SpecValid leaves with the windows", () => {
    const before = withWindows(cluster(), [{ days: ["Wed"], start: "10:00", duration: "1h" }]);
    const first = decide(observed(before, [asking("m1")]), SETTINGS);
    expect(first.status.conditions?.find((x) => x.type === "SpecValid")?.reason).toBe(
      "SpecAccepted",
    );
    const after = { ...cluster(), status: first.status };
    const d = decide(observed(after, [asking("m1")]), SETTINGS);
    expect(d.status.conditions?.some((x) => x.type === "SpecValid")).toBe(false);
  });
});

describe("the AVAILABLE column in decide", () => {
  it("marks the release a machine of the Cluster failed, keeping the channel's word", () => {
    const c = cluster({ status: { available: V2 } });
    const d = decide(observed(c, [fellBack("m1"), machine("m2")]), SETTINGS);
    expect(d.status.available).toBe(V2);
    expect(d.status.availableText).toBe(`${V2} (failed on m1)`);
  });
});

describe("soak in decide", () => {
  const soaking = (c: Cluster, s: number): Cluster => withRollout(c, { soakSeconds: s });

  it("without soak a machine back and Ready gives its turn back at once", () => {
    const d = decide(observed(cluster({ turns: [turn("m1")] }), [back("m1")]), SETTINGS);
    expect(d.releases.map((r) => r.reason)).toEqual(["Returned"]);
  });

  it("with soak, the first sight of it back records returnedAt and keeps the turn", () => {
    const d = decide(
      observed(soaking(cluster({ turns: [turn("m1")] }), 60), [back("m1"), asking("m2")]),
      SETTINGS,
    );
    expect(d.releases).toEqual([]);
    expect(d.status.rebootTurns?.[0]?.returnedAt).toBe(iso(NOW));
    expect(d.grants).toEqual([]); // its budget slot is still taken
    expect(progressing(d)?.message).toContain(`m1 until ${iso(NOW, 60)}`);
  });

  it("released once it stayed Ready that long", () => {
    const t = turn("m1", { returnedAt: iso(NOW, -60) });
    const d = decide(
      observed(soaking(cluster({ turns: [t] }), 60), [back("m1"), asking("m2")]),
      SETTINGS,
    );
    expect(d.releases.map((r) => r.turn.machine)).toEqual(["m1"]);
    expect(d.grants.map((g) => g.machine)).toEqual(["m2"]);
  });

  it("not yet: one second short", () => {
    const t = turn("m1", { returnedAt: iso(NOW, -59) });
    const d = decide(observed(soaking(cluster({ turns: [t] }), 60), [back("m1")]), SETTINGS);
    expect(d.releases).toEqual([]);
  });

  it("leaving Ready restarts the soak", () => {
    const t = turn("m1", { returnedAt: iso(NOW, -30) });
    const notReady = machine("m1", { status: { version: V2, digest: D2, step: "Downloading" } });
    const d = decide(observed(soaking(cluster({ turns: [t] }), 60), [notReady]), SETTINGS);
    expect(d.status.rebootTurns?.[0]?.returnedAt).toBeUndefined();
  });

  it("a soaking turn does not stall past its deadline", () => {
    const t = turn("m1", { returnedAt: iso(NOW, -30), deadline: iso(NOW, -1) });
    const d = decide(observed(soaking(cluster({ turns: [t] }), 600), [back("m1")]), SETTINGS);
    expect(d.stalls).toEqual([]);
  });

  it("a rollback is released at once, soak or not", () => {
    const rolled = machine("m1", {
      status: { version: V1, step: "Failed", lastTrial: fallenBack({ at: iso(NOW, -10) }) },
    });
    const d = decide(observed(soaking(cluster({ turns: [turn("m1")] }), 600), [rolled]), SETTINGS);
    expect(d.releases.map((r) => r.reason)).toEqual(["RolledBack"]);
  });
});
