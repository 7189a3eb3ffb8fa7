// The operator under moved clocks: its own wall clock stepped by hours (Lost is judged on its
// monotonic clock; the start-up grace starts again after a backward step), and an agent whose
// clock runs hours ahead or behind (a turn is released as RolledBack on the operator's own
// record of the trial it saw at the grant, never on the agent's time stamps).
import { describe, expect, it } from "vitest";
import { decide } from "../../src/operator/decide/decide.js";
import { HeartbeatTracker } from "../../src/operator/run/heartbeats.js";
import {
  PAUSE_MS,
  PauseDetector,
  jumpOf,
  type ClockJump,
} from "../../src/operator/run/liveness.js";
import {
  GRANTED,
  NOW,
  SETTINGS,
  V1,
  V2,
  asking,
  cluster,
  failedTrial,
  iso,
  machine,
  observed,
  turn,
} from "./operator-fixtures.js";

const HOUR_MS = 3_600_000;

describe("Lost on the operator's monotonic clock", () => {
  /** The operator's two clocks, moved by the test: they agree until it steps the wall. */
  function clocks() {
    let wall = NOW.getTime() - 60_000;
    let mono = wall;
    return {
      read: () => ({ now: new Date(wall), mono }),
      pass: (ms: number) => {
        wall += ms;
        mono += ms;
      },
      stepWall: (ms: number) => {
        wall += ms;
      },
    };
  }

  function judge(t: ReturnType<typeof clocks>, tracker: HeartbeatTracker) {
    const { now, mono } = t.read();
    const o = observed(cluster(), [machine("m1")], { now });
    return decide({ ...o, mono, heartbeats: tracker.view() }, SETTINGS);
  }

  it.each([
    ["stepped back 3 h", -3 * HOUR_MS],
    ["stepped forward 3 h", 3 * HOUR_MS],
  ])("a machine silent for 41 s reads Lost with the wall clock %s", (_name, step) => {
    const t = clocks();
    const tracker = new HeartbeatTracker(t.read().mono);
    tracker.observe("m1", "2026-12-02T10:04:00.000000Z", t.read().mono, true);
    // A renewal after the baseline: the machine is alive at this moment.
    expect(tracker.observe("m1", "2026-12-02T10:04:05.000000Z", t.read().mono, false)).toBe(true);
    t.pass(20_000);
    t.stepWall(step);
    expect(judge(t, tracker).lostMarks).toEqual([]);
    t.pass(21_000); // 41 s of silence on the monotonic clock
    const d = judge(t, tracker);
    expect(d.lostMarks).toMatchObject([{ machine: "m1", lost: true, step: "Lost" }]);
    expect(d.status.machines).toBe("0/1");
  });

  it("a machine renewed 1 s ago is not Lost when the wall clock stepped forward 3 h", () => {
    const t = clocks();
    const tracker = new HeartbeatTracker(t.read().mono);
    tracker.observe("m1", "2026-12-02T10:04:00.000000Z", t.read().mono, false);
    t.pass(1000);
    t.stepWall(3 * HOUR_MS);
    expect(judge(t, tracker).lostMarks).toEqual([]);
  });
});

describe("clock jumps between two ticks", () => {
  const tick = 250;
  it.each<[string, number, number, ClockJump | undefined]>([
    ["a normal tick", tick, tick, undefined],
    ["an event loop stalled 3 s (a starved machine)", 3000, 3000, undefined],
    ["SIGSTOP for 6 s: both clocks moved", 6000, 6000, { kind: "paused", ms: 6000 }],
    ["a suspend: only the wall clock moved", 60_000, tick, { kind: "paused", ms: 60_000 }],
    [
      "the wall stepped forward 3 h",
      3 * HOUR_MS + tick,
      tick,
      { kind: "paused", ms: 3 * HOUR_MS + tick },
    ],
    [
      "the wall stepped back 3 h",
      tick - 3 * HOUR_MS,
      tick,
      { kind: "stepped-back", ms: 3 * HOUR_MS },
    ],
    ["the wall stepped back 4 s (NTP slew range)", tick - 4000, tick, undefined],
  ])("%s", (_name, wallGap, monoGap, want) => {
    expect(jumpOf(wallGap, monoGap)).toEqual(want);
  });

  it("the detector reports a backward step, and it is not a pause", () => {
    let wall = NOW.getTime();
    let mono = 1000;
    const jumps: ClockJump[] = [];
    const d = new PauseDetector((j) => jumps.push(j), { wall: () => wall, mono: () => mono });
    wall += 200;
    mono += 200;
    expect(d.check()).toBe(false);
    wall += 200 - 3 * HOUR_MS;
    mono += 200;
    expect(d.check()).toBe(false);
    expect(jumps).toEqual([{ kind: "stepped-back", ms: 3 * HOUR_MS }]);
    wall += PAUSE_MS;
    mono += PAUSE_MS;
    expect(d.check()).toBe(true);
    expect(jumps[1]).toEqual({ kind: "paused", ms: PAUSE_MS });
  });
});

describe("an agent's clock hours off does not decide a turn's end", () => {
  const HOURS = 3 * 3600;
  /** An earlier failed trial of V2, stamped by an agent whose clock runs `offset` s ahead. */
  const earlier = (offset: number) => failedTrial({ at: iso(new Date(GRANTED), -600 + offset) });

  it("the grant records the trial the machine shows, as text", () => {
    const m = asking("m1", { status: { lastTrial: earlier(HOURS) } });
    // The failure brake off: this table is about the record, not about the brake.
    const c = cluster();
    c.spec.rollout = { maxFailedTrials: 0 };
    const d = decide(observed(c, [m]), SETTINGS);
    expect(d.grants).toMatchObject([{ machine: "m1", priorTrialAt: earlier(HOURS).at }]);
    const other = asking("m2", { status: { lastTrial: failedTrial({ version: "x" }) } });
    const d2 = decide(observed(c, [other]), SETTINGS);
    expect(d2.grants[0]?.priorTrialAt).toBe("");
  });

  it("a fresh turn is kept when the agent's earlier trial is stamped 3 h in the future", () => {
    const trial = earlier(HOURS);
    // The agent still asks (UpdatePending): it has not started its turn yet.
    const m = asking("m1", { status: { lastTrial: trial } });
    const t = turn("m1", { grantedAt: GRANTED, priorTrialAt: trial.at });
    const d = decide(observed(cluster({ turns: [t] }), [m]), SETTINGS);
    expect(d.releases).toEqual([]);
    expect(d.status.rebootTurns).toMatchObject([{ machine: "m1" }]);
  });

  it("a turn granted with no earlier trial takes a trial stamped 3 h before the grant as its own", () => {
    const now = failedTrial({ at: iso(new Date(GRANTED), 120 - HOURS) });
    const m = machine("m1", { status: { step: "Failed", version: V1, lastTrial: now } });
    const t = turn("m1", { grantedAt: GRANTED, priorTrialAt: "" });
    const d = decide(observed(cluster({ turns: [t] }), [m]), SETTINGS);
    expect(d.releases).toMatchObject([{ reason: "RolledBack", turn: { machine: "m1" } }]);
  });

  it("this turn's failed trial is RolledBack though the agent stamped it 3 h before the grant", () => {
    const prior = earlier(HOURS);
    const now = failedTrial({ at: iso(new Date(GRANTED), 120 - HOURS) });
    const m = machine("m1", { status: { step: "Failed", version: V1, lastTrial: now } });
    const t = turn("m1", { grantedAt: GRANTED, priorTrialAt: prior.at });
    const d = decide(observed(cluster({ turns: [t] }), [m]), SETTINGS);
    expect(d.releases).toMatchObject([{ reason: "RolledBack", turn: { machine: "m1" } }]);
    expect(d.releases[0]?.message).toBe(`its trial of ${V2} failed (TrialFellBack); it runs ${V1}`);
  });
});
