// The turn decision, table by table (in the style of brupop's controller statemachine.rs):
// each row is an observed fleet and the turns the operator must grant, release or stall.
import { describe, expect, it } from "vitest";
import type { Cluster, Machine } from "../../src/api/index.js";
import { DEFAULT_SETTINGS, decide, type Observed } from "../../src/operator/decide/decide.js";
import {
  D1,
  D3,
  NOW,
  SETTINGS,
  T0,
  V1,
  V2,
  V3,
  asking,
  cluster,
  iso,
  machine,
  observed,
  turn,
} from "./operator-fixtures.js";

const granted = (o: Observed): string[] => decide(o, SETTINGS).grants.map((g) => g.machine);

/**
 * The page's budget rules alone: the failure brake (and with it the limit on trials of a
 * release no machine proved yet) off, as maxFailedTrials 0 sets it. That limit has its own
 * table in operator-brakes.test.ts.
 */
const brakeOff = (c: Cluster): Cluster => ({
  ...c,
  spec: { ...c.spec, rollout: { ...c.spec.rollout, maxFailedTrials: 0 } },
});

describe("decide: which machine gets a turn", () => {
  const cases: {
    name: string;
    c: Cluster;
    ms: Machine[];
    o?: Partial<Observed>;
    want: string[];
  }[] = [
    {
      name: "an Auto machine that staged the target and asks",
      c: cluster(),
      ms: [asking("m1")],
      want: ["m1"],
    },
    {
      name: "nothing without a request",
      c: cluster(),
      ms: [asking("m1", { status: { turnRequest: undefined } })],
      want: [],
    },
    {
      name: "a Manual machine without approval waits",
      c: cluster(),
      ms: [asking("m1", { spec: { rebootPolicy: "Manual" }, status: { step: "RebootPending" } })],
      want: [],
    },
    {
      name: "rebootPolicy defaults to Manual",
      c: cluster(),
      ms: [asking("m1", { spec: { rebootPolicy: undefined } })],
      want: [],
    },
    {
      name: "a Manual machine approved for exactly the staged version",
      c: cluster(),
      ms: [
        asking("m1", {
          spec: { rebootPolicy: "Manual", approval: { version: V2, by: "alice", at: iso(T0) } },
          status: { step: "RebootPending" },
        }),
      ],
      want: ["m1"],
    },
    {
      name: "an approval for an older target does not carry over",
      c: cluster(),
      ms: [
        asking("m1", {
          spec: { rebootPolicy: "Manual", approval: { version: V1, by: "alice", at: iso(T0) } },
        }),
      ],
      want: [],
    },
    {
      name: "an approval naming another digest does not count",
      c: cluster(),
      ms: [
        asking("m1", {
          spec: {
            rebootPolicy: "Manual",
            approval: { version: V2, digest: D3, by: "alice", at: iso(T0) },
          },
        }),
      ],
      want: [],
    },
    {
      name: "a release staged for an earlier target is not asked for",
      c: cluster({ version: V3 }),
      ms: [asking("m1")],
      want: [],
    },
    {
      name: "a staged digest other than the catalog's is not asked for",
      c: cluster(),
      ms: [
        asking("m1", { status: { staged: { version: V2, digest: D3, slot: "b", at: iso(T0) } } }),
      ],
      want: [],
    },
    {
      name: "a machine already running the target needs none",
      c: cluster(),
      ms: [asking("m1", { status: { version: V2 } })],
      want: [],
    },
    { name: "no target, no turn", c: cluster({ version: null }), ms: [asking("m1")], want: [] },
    {
      name: "budget 1 (default): one at a time, oldest request first",
      c: cluster(),
      ms: [asking("m2", { askedAfter: 5 }), asking("m1", { askedAfter: 9 }), asking("m3")],
      want: ["m3"],
    },
    {
      name: "budget 1 and a turn held: nothing more",
      c: cluster({ turns: [] }),
      ms: [asking("m1"), machine("m0", { status: { step: "Updating", updateStage: "Draining" } })],
      want: [],
    },
    {
      name: "budget 2: two turns",
      c: cluster({ maxUnavailable: 2 }),
      ms: [asking("m1"), asking("m2", { askedAfter: 1 }), asking("m3", { askedAfter: 2 })],
      want: ["m1", "m2"],
    },
    {
      name: "budget 50% of 4 machines = 2",
      c: cluster({ maxUnavailable: "50%" }),
      ms: ["m1", "m2", "m3", "m4"].map((n, i) => asking(n, { askedAfter: i })),
      want: ["m1", "m2"],
    },
    {
      name: "a percentage rounds up, at least one machine: 10% of 4 = 1",
      c: cluster({ maxUnavailable: "10%" }),
      ms: ["m1", "m2", "m3", "m4"].map((n, i) => asking(n, { askedAfter: i })),
      want: ["m1"],
    },
    {
      name: "a turn already held counts: budget 2 with one held grants one",
      c: cluster({ maxUnavailable: 2, turns: [turn("m0")] }),
      ms: [
        machine("m0", { status: { step: "Updating", updateStage: "Draining" } }),
        asking("m1"),
        asking("m2", { askedAfter: 1 }),
      ],
      want: ["m1"],
    },
    {
      name: "a Lost machine counts against the budget",
      c: cluster({ maxUnavailable: 2 }),
      ms: [asking("m1"), asking("m2", { askedAfter: 1 }), machine("gone")],
      o: observed(
        cluster({ maxUnavailable: 2 }),
        [asking("m1"), asking("m2", { askedAfter: 1 }), machine("gone")],
        {
          silentFor: { gone: 40 },
        },
      ),
      want: ["m1"],
    },
    {
      name: "a Lost machine asking is not granted",
      c: cluster({ maxUnavailable: 3 }),
      ms: [asking("m1")],
      o: observed(cluster({ maxUnavailable: 3 }), [asking("m1")], { silentFor: { m1: 41 } }),
      want: [],
    },
    {
      name: "one leader at a time whatever the budget",
      c: cluster({ maxUnavailable: 5 }),
      ms: [
        asking("l1", { spec: { role: "Leader" } }),
        asking("l2", { spec: { role: "Leader" }, askedAfter: 1 }),
        asking("w1", { askedAfter: 2 }),
      ],
      want: ["l1", "w1"],
    },
    {
      name: "every machine a leader: one at a time",
      c: cluster({ maxUnavailable: "100%" }),
      ms: ["l1", "l2", "l3"].map((n, i) => asking(n, { spec: { role: "Leader" }, askedAfter: i })),
      want: ["l1"],
    },
    {
      name: "no leaders: the budget alone decides",
      c: cluster({ maxUnavailable: 3 }),
      ms: ["w1", "w2", "w3", "w4"].map((n, i) => asking(n, { askedAfter: i })),
      want: ["w1", "w2", "w3"],
    },
    {
      name: "a Lost leader is a leader down",
      c: cluster({ maxUnavailable: 5 }),
      ms: [asking("l1", { spec: { role: "Leader" } }), machine("l0", { spec: { role: "Leader" } })],
      o: observed(
        cluster({ maxUnavailable: 5 }),
        [asking("l1", { spec: { role: "Leader" } }), machine("l0", { spec: { role: "Leader" } })],
        { silentFor: { l0: 60 } },
      ),
      want: [],
    },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const o = { ...observed(c.c, c.ms), ...c.o };
      expect(granted({ ...o, cluster: brakeOff(o.cluster) })).toEqual(c.want);
    });
  }

  it("a turn held by a leader keeps every other leader waiting, while workers go", () => {
    const c = cluster({ maxUnavailable: 5, turns: [turn("l0", { leader: true })] });
    const ms = [
      machine("l0", {
        spec: { role: "Leader" },
        status: { step: "Updating", updateStage: "Rebooting" },
      }),
      asking("l1", { spec: { role: "Leader" } }),
      asking("w1", { askedAfter: 1 }),
    ];
    const d = decide(observed(brakeOff(c), ms), SETTINGS);
    expect(d.grants.map((g) => g.machine)).toEqual(["w1"]);
    expect(d.blocked).toEqual({ kind: "leader", machine: "l1", down: "l0" });
  });

  it.each([
    { name: "Updating", status: { step: "Updating" as const, updateStage: "Rebooting" as const } },
    { name: "Updating with no stage yet", status: { step: "Updating" as const } },
  ])("a leader $name without a turn record (a record lost) is a leader down", ({ status }) => {
    // What a lost record leaves behind: the leader is down, and no record says so.
    const c = cluster({ maxUnavailable: 5, turns: [] });
    const ms = [
      machine("l0", { spec: { role: "Leader" }, status }),
      asking("l1", { spec: { role: "Leader" } }),
      asking("w1", { askedAfter: 1 }),
    ];
    const d = decide(observed(brakeOff(c), ms), SETTINGS);
    expect(d.grants.map((g) => g.machine)).toEqual(["w1"]);
    expect(d.blocked).toEqual({ kind: "leader", machine: "l1", down: "l0" });
  });

  it("the leader rule reads the turn's record, not the machine's current role", () => {
    // l0 was a leader when granted; a role edit mid-turn must not let a second leader down.
    const c = cluster({ maxUnavailable: 5, turns: [turn("l0", { leader: true })] });
    const ms = [
      machine("l0", { status: { step: "Updating", updateStage: "Draining" } }),
      asking("l1", { spec: { role: "Leader" } }),
    ];
    expect(granted(observed(c, ms))).toEqual([]);
  });

  it("a turn records who granted it, for which release, and its deadline", () => {
    const d = decide(observed(cluster(), [asking("m1", { spec: { role: "Leader" } })]), SETTINGS);
    expect(d.grants).toEqual([
      {
        machine: "m1",
        grantedAt: iso(NOW),
        grantedBy: "op-a",
        leader: true,
        version: V2,
        digest: `sha256:${"2".repeat(64)}`,
        deadline: iso(NOW, 30 * 60),
        priorTrialAt: "",
      },
    ]);
    expect(d.status.rebootTurns).toEqual(d.grants);
    expect(d.status.turns).toBe("m1");
    expect(d.changed).toBe(true);
  });

  it("a budget lowered below the turns held grants nothing and takes nothing back", () => {
    const c = cluster({ maxUnavailable: 1, turns: [turn("a"), turn("b")] });
    const ms = [
      machine("a", {
        status: {
          step: "Updating",
          updateStage: "Draining",
          turnRequest: { version: V2, digest: `sha256:${"2".repeat(64)}`, at: iso(T0) },
        },
      }),
      machine("b", { status: { step: "Updating", updateStage: "Rebooting" } }),
      asking("c"),
    ];
    const d = decide(observed(c, ms), SETTINGS);
    expect(d.grants).toEqual([]);
    expect(d.releases).toEqual([]);
    expect(d.status.rebootTurns?.map((t) => t.machine)).toEqual(["a", "b"]);
  });
});

describe("decide: the start-up grace", () => {
  it("the real default is 40 seconds", () => {
    expect(DEFAULT_SETTINGS.startGraceSeconds).toBe(40);
    const ms = [asking("m1")];
    const at = (s: number) => observed(cluster(), ms, { now: new Date(T0.getTime() + s * 1000) });
    expect(granted(at(39.999))).toEqual([]);
    expect(granted(at(40))).toEqual(["m1"]);
  });

  it("Progressing says when granting resumes", () => {
    const now = new Date(T0.getTime() + 12_000);
    const d = decide(observed(cluster(), [asking("m1")], { now }), SETTINGS);
    expect(d.grants).toEqual([]);
    expect(d.blocked).toEqual({ kind: "grace", until: new Date("2026-12-02T10:00:40Z") });
    const p = d.status.conditions?.find((c) => c.type === "Progressing");
    expect(p).toMatchObject({
      status: "True",
      reason: "StartupGrace",
      lastTransitionTime: iso(T0),
    });
    expect(p?.message).toContain("granting resumes at 2026-12-02T10:00:40Z");
  });

  it("a shorter grace (for tests) is a setting", () => {
    const now = new Date(T0.getTime() + 2_000);
    const o = observed(cluster(), [asking("m1")], { now });
    expect(decide(o, { ...SETTINGS, startGraceSeconds: 1 }).grants).toHaveLength(1);
  });

  it("a copy in its grace leaves alone what a live copy wrote after it started", () => {
    const now = new Date(T0.getTime() + 10_000);
    const live = {
      type: "Progressing" as const,
      status: "True" as const,
      reason: "RolloutProgressing" as const,
      message: "1 of 1 machine(s) still to move",
      lastTransitionTime: iso(T0, 5),
    };
    const c = cluster({ status: { conditions: [live] } });
    const d = decide(observed(c, [asking("m1")], { now }), SETTINGS);
    expect(d.status.conditions).toEqual([live]);
    // ...but replaces one from before its start (its own earlier life).
    const old = { ...live, lastTransitionTime: iso(T0, -3600) };
    const d2 = decide(
      observed(cluster({ status: { conditions: [old] } }), [asking("m1")], { now }),
      SETTINGS,
    );
    expect(d2.status.conditions?.[0]?.reason).toBe("StartupGrace");
  });
});

describe("decide: turns leave the list", () => {
  const T = turn("m1");
  const cases: { name: string; m?: Machine; lost?: boolean; reason?: string }[] = [
    {
      name: "back on the new release and Ready",
      m: machine("m1", { status: { version: V2, step: "Ready" } }),
      reason: "Returned",
    },
    {
      name: "rolled back after a failed trial of this turn, and said so",
      m: machine("m1", {
        status: {
          version: V1,
          step: "Failed",
          lastTrial: {
            version: V2,
            digest: `sha256:${"2".repeat(64)}`,
            slot: "b",
            result: "Failed",
            at: iso(NOW, -5),
            reason: "TrialDidNotRejoin",
          },
        },
      }),
      reason: "RolledBack",
    },
    {
      name: "a failed trial from before this turn is not this turn's",
      m: machine("m1", {
        status: {
          step: "Updating",
          updateStage: "Rebooting",
          lastTrial: {
            version: V2,
            digest: `sha256:${"2".repeat(64)}`,
            slot: "b",
            result: "Failed",
            at: iso(NOW, -3600),
            reason: "TrialDidNotRejoin",
          },
        },
      }),
    },
    {
      name: "still Updating: kept",
      m: machine("m1", { status: { step: "Updating", updateStage: "Draining" } }),
    },
    {
      name: "granted, not yet acting, still asking: kept",
      m: asking("m1"),
    },
    {
      name: "gave the turn back (retargeted before it acted)",
      m: machine("m1", { status: { step: "Downloading" } }),
      reason: "GivenBack",
    },
    {
      name: "a Lost machine keeps its turn",
      m: machine("m1", { status: { version: V2, step: "Ready" } }),
      lost: true,
    },
    { name: "its Machine was deleted", reason: "MachineDeleted" },
    {
      name: "a person released it",
      m: machine("m1", {
        spec: {
          resume: { turnGrantedAt: T.grantedAt, by: "alice", at: iso(NOW), reason: "PSU replaced" },
        },
        status: { step: "Updating", updateStage: "Rebooting" },
      }),
      reason: "Resumed",
    },
    {
      name: "a release of an earlier turn does not release this one",
      m: machine("m1", {
        spec: {
          resume: { turnGrantedAt: iso(NOW, -9999), by: "alice", at: iso(NOW), reason: "old" },
        },
        status: { step: "Updating", updateStage: "Rebooting" },
      }),
    },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const ms = c.m === undefined ? [] : [c.m];
      const o = observed(cluster({ turns: [T] }), ms, { silentFor: c.lost ? { m1: 50 } : {} });
      const d = decide(o, SETTINGS);
      expect(d.releases.map((r) => r.reason)).toEqual(c.reason === undefined ? [] : [c.reason]);
      expect(d.status.rebootTurns?.length).toBe(c.reason === undefined ? 1 : 0);
    });
  }

  it("a released slot goes to the next machine in the same write", () => {
    const c = cluster({ turns: [turn("m1")] });
    const ms = [machine("m1", { status: { version: V2, step: "Ready" } }), asking("m2")];
    const d = decide(observed(c, ms), SETTINGS);
    expect(d.releases.map((r) => r.turn.machine)).toEqual(["m1"]);
    expect(d.status.rebootTurns?.map((t) => t.machine)).toEqual(["m2"]);
  });
});

describe("decide: stalls", () => {
  const blocked = machine("m1", {
    status: {
      step: "Updating",
      updateStage: "Draining",
      drainBlocker: {
        pod: "shop/db-0",
        podDisruptionBudget: "shop/db",
        since: iso(NOW, -1700),
        message: "Cannot evict pod as it would violate the pod's disruption budget",
      },
    },
  });
  const late = turn("m1", { grantedAt: iso(NOW, -1900), deadline: iso(NOW, -100) });

  it("a turn past its deadline stalls the rollout, saying where and why", () => {
    const c = cluster({ maxUnavailable: 3, turns: [late] });
    const d = decide(observed(c, [blocked, asking("m2")]), SETTINGS);
    expect(d.grants).toEqual([]);
    expect(d.stalls).toHaveLength(1);
    expect(d.status.rebootTurns?.[0]?.stalledAt).toBe(iso(NOW));
    const p = d.status.conditions?.find((x) => x.type === "Progressing");
    expect(p).toMatchObject({ status: "False", reason: "RolloutStalled" });
    for (const part of [
      "Machine m1",
      "31m40s",
      "Updating (Draining)",
      "shop/db-0",
      "shop/db",
      "liken rollout resume lab m1",
    ]) {
      expect(p?.message).toContain(part);
    }
    expect(d.stalls[0]?.message).toContain("PodDisruptionBudget shop/db");
  });

  it("a stall is reported once and blocks grants until released", () => {
    const stalled = { ...late, stalledAt: iso(NOW, -50) };
    const c = cluster({ maxUnavailable: 3, turns: [stalled] });
    const d = decide(observed(c, [blocked, asking("m2")]), SETTINGS);
    expect(d.stalls).toEqual([]);
    expect(d.grants).toEqual([]);
    expect(d.blocked?.kind).toBe("stalled");
  });

  it("after `liken rollout resume`, turns flow again", () => {
    const stalled = { ...late, stalledAt: iso(NOW, -50) };
    const resumed = {
      ...blocked,
      spec: {
        ...blocked.spec,
        resume: { turnGrantedAt: late.grantedAt, by: "alice", at: iso(NOW), reason: "PDB fixed" },
      },
    };
    const d = decide(observed(cluster({ turns: [stalled] }), [resumed, asking("m2")]), SETTINGS);
    expect(d.releases.map((r) => r.reason)).toEqual(["Resumed"]);
    // m1 still reports Updating: it is down and counts against the budget of 1.
    expect(d.grants).toEqual([]);
    const d3 = decide(
      observed(cluster({ maxUnavailable: 2, turns: [stalled] }), [resumed, asking("m2")]),
      SETTINGS,
    );
    expect(d3.grants.map((g) => g.machine)).toEqual(["m2"]);
    expect(d3.status.conditions?.find((x) => x.type === "Progressing")?.reason).toBe(
      "RolloutProgressing",
    );
  });
});

describe("decide: Lost", () => {
  const cases: {
    name: string;
    m: Machine;
    silent?: number;
    unseen?: boolean;
    startedAgo?: number;
    mark?: string;
  }[] = [
    { name: "heartbeat 39 s ago: alive", m: machine("m1"), silent: 39 },
    { name: "no heartbeat for 40 s: Lost", m: machine("m1"), silent: 40, mark: "Lost" },
    {
      name: "down before the operator started: last status until 40 s after its start",
      m: machine("m1"),
      unseen: true,
      startedAgo: 39,
    },
    { name: "...and Lost after", m: machine("m1"), unseen: true, startedAgo: 40, mark: "Lost" },
    {
      name: "recorded Lost by another copy, no renewal seen: stays Lost",
      m: machine("m1", { status: { step: "Lost" } }),
      unseen: true,
      startedAgo: 5,
    },
    {
      name: "heartbeat returns: leaves Lost, shows the step its status says",
      m: asking("m1", { status: { step: "Lost" } }),
      silent: 2,
      mark: "UpdatePending",
    },
    {
      name: "heartbeat returns mid-update: Updating",
      m: machine("m1", { status: { step: "Lost", updateStage: "Proving" } }),
      silent: 2,
      mark: "Updating",
    },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const startedAt = new Date(NOW.getTime() - (c.startedAgo ?? 300) * 1000);
      const o = observed(cluster(), [c.m], {
        startedAt,
        silentFor: { m1: c.silent ?? 5 },
        unseen: c.unseen ? ["m1"] : [],
      });
      const d = decide(o, SETTINGS);
      expect(d.lostMarks.map((l) => l.step)).toEqual(c.mark === undefined ? [] : [c.mark]);
    });
  }

  it("a Lost mark is conditioned on the Machine's resourceVersion", () => {
    const d = decide(observed(cluster(), [machine("m1")], { silentFor: { m1: 100 } }), SETTINGS);
    expect(d.lostMarks[0]).toMatchObject({ machine: "m1", resourceVersion: "rv-m1", lost: true });
    expect(d.status.counts).toMatchObject({ lost: 1, unavailable: 1 });
  });
});

describe("decide: the status the page shows", () => {
  it("Updating while machines move; columns", () => {
    const ms = [
      machine("l1", { spec: { role: "Leader" }, status: { version: V2, digest: D1 } }),
      machine("l2", { spec: { role: "Leader" } }),
      machine("w1", { status: { version: V2, step: "Updating", updateStage: "Proving" } }),
    ];
    const c = cluster({ turns: [turn("w1")] });
    const d = decide(observed(c, ms), { ...SETTINGS, endpoint: "https://10.0.0.1:6443" });
    expect(d.status).toMatchObject({
      phase: "Updating",
      machines: "1/3",
      version: V1,
      newest: V2,
      leaders: ["l1", "l2"],
      endpoint: "https://10.0.0.1:6443",
      turns: "w1",
      observedGeneration: 3,
    });
  });

  it("Ready when every machine runs the target and no turn is held; a second decision changes nothing", () => {
    const ms = [
      machine("a", { status: { version: V2 } }),
      machine("b", { status: { version: V2 } }),
    ];
    const d = decide(observed(cluster(), ms), SETTINGS);
    expect(d.status).toMatchObject({ phase: "Ready", machines: "2/2", version: V2, newest: V2 });
    expect(d.status.conditions?.[0]).toMatchObject({ reason: "RolloutComplete", status: "True" });
    const again = decide(observed({ ...cluster(), status: d.status }, ms), SETTINGS);
    expect(again.changed).toBe(false);
  });

  it("a Manual machine that waits for approval before asking is waiting too", () => {
    const ms = [
      asking("m1", {
        spec: { rebootPolicy: "Manual" },
        status: { step: "RebootPending", turnRequest: undefined },
      }),
    ];
    const d = decide(observed(cluster(), ms), SETTINGS);
    expect(d.grants).toEqual([]);
    expect(d.status.conditions?.[0]).toMatchObject({ reason: "WaitingForApproval" });
  });

  it("WaitingForApproval names the machines and the command", () => {
    const ms = [
      asking("m1", { spec: { rebootPolicy: "Manual" }, status: { step: "RebootPending" } }),
    ];
    const p = decide(observed(cluster(), ms), SETTINGS).status.conditions?.[0];
    expect(p).toMatchObject({ reason: "WaitingForApproval" });
    expect(p?.message).toContain("liken approve-reboot lab <machine>");
    expect(p?.message).toContain("m1");
  });

  it("no target: Progressing False NoTarget", () => {
    const p = decide(observed(cluster({ version: null }), [machine("a")]), SETTINGS).status;
    expect(p.phase).toBe("Pending");
    expect(p.conditions?.[0]).toMatchObject({ status: "False", reason: "NoTarget" });
  });
});
