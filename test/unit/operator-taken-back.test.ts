// A turn taken back keeps its machine counted down until the machine says it did not act on it
// (src/operator/turns/taken-back.ts; seed 71742: a drain begun while the status announcing it failed
// went uncounted once its turn was taken back, and a fourth machine went down on a budget of 3).
import { describe, expect, it } from "vitest";
import type { Machine, MachineStatus, TakenBackTurn } from "../../src/api/index.js";
import { decide } from "../../src/operator/decide/decide.js";
import {
  D2,
  GRANTED,
  NOW,
  SETTINGS,
  V2,
  asking,
  cluster,
  iso,
  machine,
  observed,
  turn,
} from "./operator-fixtures.js";

const leader = { spec: { role: "Leader" as const } };

function takenBack(name: string, over: Partial<TakenBackTurn> = {}): TakenBackTurn {
  return {
    machine: name,
    grantedAt: GRANTED,
    leader: false,
    version: V2,
    digest: D2,
    takenBackAt: iso(NOW, -5),
    ...over,
  };
}

/** What m1 says after its turn went back: asking again, acknowledged or not. */
function m1(status: Partial<MachineStatus> = {}, spec = {}): Machine {
  return asking("m1", { status, spec });
}

interface Row {
  name: string;
  budget: number;
  machines: Machine[];
  recorded: TakenBackTurn[];
  machinesVersion?: string;
  /** The records left in status.takenBackTurns, and the machines granted a turn. */
  kept: string[];
  granted: string[];
}

const ack = { turnTakenBack: { grantedAt: GRANTED } };

const rows: Row[] = [
  {
    name: "not acknowledged: m1 counts against a budget of 1, m2 waits",
    budget: 1,
    machines: [m1(), asking("m2", { askedAfter: -5 })],
    recorded: [takenBack("m1")],
    kept: ["m1"],
    granted: [],
  },
  {
    name: "acknowledged (its grant named, UpdatePending): dropped, the budget has room again",
    budget: 1,
    machines: [m1(ack), asking("m2", { askedAfter: -5 })],
    recorded: [takenBack("m1")],
    kept: [],
    granted: ["m2"],
  },
  {
    name: "acknowledged but still Updating (its give-back under way): kept",
    budget: 1,
    machines: [
      m1({ ...ack, step: "Updating", updateStage: "Rejoining" }),
      asking("m2", { askedAfter: -5 }),
    ],
    recorded: [takenBack("m1")],
    kept: ["m1"],
    granted: [],
  },
  {
    name: "an acknowledgement of an earlier grant is not one of this grant: kept",
    budget: 1,
    machines: [
      m1({ turnTakenBack: { grantedAt: iso(NOW, -3600) } }),
      asking("m2", { askedAfter: -5 }),
    ],
    recorded: [takenBack("m1")],
    kept: ["m1"],
    granted: [],
  },
  {
    name: "a leader taken back and not acknowledged: no other leader goes, whatever the budget",
    budget: 5,
    machines: [
      machine("m1", { ...leader, status: { step: "UpdatePending" } }),
      asking("m3", leader),
    ],
    recorded: [takenBack("m1", { leader: true })],
    kept: ["m1"],
    granted: [],
  },
  {
    name: "the machine itself asks again before it acknowledged: a new turn, which counts it",
    budget: 1,
    machines: [m1(), asking("m2")],
    recorded: [takenBack("m1")],
    kept: [],
    granted: ["m1"],
  },
  {
    name: "a leader taken back asks again, no other leader down: its new turn replaces the record",
    budget: 1,
    machines: [m1({}, leader.spec), asking("m3", leader)],
    recorded: [takenBack("m1", { leader: true })],
    kept: [],
    granted: ["m1"],
  },
  {
    name: "its Machine deleted, on a view as new as the Cluster: dropped",
    budget: 1,
    machines: [asking("m2")],
    recorded: [takenBack("m1")],
    kept: [],
    granted: ["m2"],
  },
  {
    name: "its Machine missing from a view older than the Cluster: kept until a fresh view",
    budget: 1,
    machines: [asking("m2")],
    recorded: [takenBack("m1")],
    machinesVersion: "99",
    kept: ["m1"],
    granted: [],
  },
  {
    name: "a person's resume naming the grant releases it",
    budget: 1,
    machines: [
      m1(
        {},
        {
          resume: { turnGrantedAt: GRANTED, by: "ops", at: iso(NOW, -1), reason: "checked it" },
        },
      ),
      asking("m2", { askedAfter: -5 }),
    ],
    recorded: [takenBack("m1")],
    kept: [],
    granted: ["m2"],
  },
];

describe("a turn taken back counts until its machine says it did not act on it", () => {
  it.each(rows)("$name", (row) => {
    const base = cluster({ maxUnavailable: row.budget });
    const c = { ...base, status: { ...base.status, takenBackTurns: row.recorded } };
    const d = decide(
      observed(c, row.machines, {
        ...(row.machinesVersion === undefined ? {} : { machinesVersion: row.machinesVersion }),
      }),
      SETTINGS,
    );
    expect((d.status.takenBackTurns ?? []).map((t) => t.machine)).toEqual(row.kept);
    expect(d.grants.map((g) => g.machine)).toEqual(row.granted);
  });

  it("a turn overtaken now is recorded as taken back, in the same write", () => {
    const c = cluster({ maxUnavailable: 3, turns: [turn("m1", { leader: true })] });
    const d = decide(
      observed(c, [asking("m1", leader), machine("m2", leader)], { silentFor: { m2: 60 } }),
      SETTINGS,
    );
    expect(d.status.rebootTurns).toEqual([]);
    expect(d.status.takenBackTurns).toEqual([
      {
        machine: "m1",
        grantedAt: GRANTED,
        leader: true,
        version: V2,
        digest: D2,
        takenBackAt: iso(NOW),
      },
    ]);
  });

  it("seed 71742's second: m007 taken back and unacknowledged, the slot does not go to a leader", () => {
    // Budget 3: m009 holds a turn, m021 is Lost, m007's turn was just taken back (its drain
    // began, its status write failed). m003, a leader, asks: four down would break the budget.
    const c0 = cluster({ maxUnavailable: 3, turns: [turn("m009", { grantedAt: iso(NOW, -30) })] });
    const c = { ...c0, status: { ...c0.status, takenBackTurns: [takenBack("m007")] } };
    const machines = [
      asking("m009", { status: { step: "Updating", updateStage: "Draining" } }),
      machine("m021"),
      asking("m007"),
      asking("m003", leader),
      machine("m010"),
      machine("m011"),
    ];
    const d = decide(observed(c, machines, { silentFor: { m021: 60 } }), SETTINGS);
    expect(d.grants).toEqual([]);
    expect(d.blocked).toMatchObject({ kind: "budget", down: 3, budget: 3 });
  });
});

describe("a turn taken back ends when what the machine began is over", () => {
  const run = (m: Machine, entry: TakenBackTurn) => {
    const base = cluster({ maxUnavailable: 1 });
    const c = { ...base, status: { ...base.status, takenBackTurns: [entry] } };
    return decide(observed(c, [m]), SETTINGS).status.takenBackTurns ?? [];
  };
  it.each([
    ["back on the turn's release and Ready", { version: V2, digest: D2, step: "Ready" }, []],
    ["still on the old release, Ready, no word", { step: "Ready" }, ["m1"]],
    [
      "its trial of the release reported, out of Updating",
      {
        step: "Failed",
        lastTrial: {
          version: V2,
          digest: D2,
          slot: "b",
          result: "Failed",
          at: iso(NOW, -2),
          reason: "TrialFellBack",
        },
      },
      [],
    ],
    [
      "a trial with the stamp the grant saw is an earlier one",
      {
        step: "Failed",
        lastTrial: {
          version: V2,
          digest: D2,
          slot: "b",
          result: "Failed",
          at: iso(NOW, -3600),
          reason: "TrialFellBack",
        },
      },
      ["m1"],
    ],
  ] as const)("%s", (_name, status, kept) => {
    const m = machine("m1", { status: status as Partial<MachineStatus> });
    const entry = takenBack("m1", { priorTrialAt: iso(NOW, -3600) });
    expect(run(m, entry).map((t) => t.machine)).toEqual(kept);
  });
});
