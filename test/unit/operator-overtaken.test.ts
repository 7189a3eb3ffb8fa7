// A turn granted while the rules allowed it, then overtaken by a machine that went down since
// (src/operator/turns/overtaken.ts): taken back (Overtaken) only while its machine has not started,
// only on a Machine view as new as the Cluster, and only when the budget or the leader rule
// refuses it now. The simulator found both cases (docs/simulation.md, seeds 433 and 889).
import { describe, expect, it } from "vitest";
import type { Machine, MachineStatus } from "../../src/api/index.js";
import { decide } from "../../src/operator/decide/decide.js";
import { SETTINGS, V2, asking, cluster, machine, observed, turn } from "./operator-fixtures.js";

const leader = { spec: { role: "Leader" as const } };
const started: Partial<MachineStatus> = { step: "Updating", updateStage: "CheckingSlot" };

interface Row {
  name: string;
  budget: number;
  /** The machines, the turn holders first; `silent` ones are Lost (60 s without a renewal). */
  machines: Machine[];
  turns: { machine: string; leader?: boolean }[];
  silent?: string[];
  machinesVersion?: string;
  /** The machines whose turns are taken back, with the message's cause. */
  want: string[];
}

const rows: Row[] = [
  {
    name: "a leader's turn not started, another leader Lost since the grant",
    budget: 3,
    machines: [asking("m1", leader), machine("m2", leader)],
    turns: [{ machine: "m1", leader: true }],
    silent: ["m2"],
    want: ["m1: leader m2 is down since the grant, and one leader is down at a time"],
  },
  {
    name: "a Lost leader holding a turn it had not started, another leader Lost too",
    budget: 3,
    machines: [asking("m1", leader), machine("m2", leader)],
    turns: [{ machine: "m1", leader: true }],
    silent: ["m1", "m2"],
    want: ["m1: leader m2 is down since the grant, and one leader is down at a time"],
  },
  {
    name: "a leader that started keeps its turn (what it began ends by finishing it)",
    budget: 3,
    machines: [asking("m1", { ...leader, status: started }), machine("m2", leader)],
    turns: [{ machine: "m1", leader: true }],
    silent: ["m2"],
    want: [],
  },
  {
    name: "a worker's turn with a leader Lost: the leader rule is for leaders",
    budget: 3,
    machines: [asking("m1"), machine("m2", leader)],
    turns: [{ machine: "m1" }],
    silent: ["m2"],
    want: [],
  },
  {
    name: "budget 2, two turns not started, a machine Lost since: the newest grant goes back",
    budget: 2,
    machines: [asking("m1"), asking("m2"), machine("m3")],
    turns: [{ machine: "m1" }, { machine: "m2" }],
    silent: ["m3"],
    want: ["m2: 2 machines are down or hold a turn (m3, m1), the budget allows 2"],
  },
  {
    name: "budget 2, one started, one not, a machine Lost: the one not started goes back",
    budget: 2,
    machines: [asking("m1"), asking("m2", { status: started }), machine("m3")],
    turns: [{ machine: "m1" }, { machine: "m2" }],
    silent: ["m3"],
    want: ["m1: 2 machines are down or hold a turn (m2, m3), the budget allows 2"],
  },
  {
    name: "budget 2, both started, a machine Lost: nothing to take back",
    budget: 2,
    machines: [asking("m1", { status: started }), asking("m2", { status: started }), machine("m3")],
    turns: [{ machine: "m1" }, { machine: "m2" }],
    silent: ["m3"],
    want: [],
  },
  {
    name: "budget 2, one turn, a machine Lost: within the budget, kept",
    budget: 2,
    machines: [asking("m1"), machine("m3")],
    turns: [{ machine: "m1" }],
    silent: ["m3"],
    want: [],
  },
  {
    name: "the holder Lost itself, the others at the budget: taken back (it acts once back)",
    budget: 2,
    machines: [asking("m1"), asking("m2", { status: started }), machine("m3")],
    turns: [{ machine: "m1" }, { machine: "m2" }],
    silent: ["m1", "m3"],
    want: ["m1: 2 machines are down or hold a turn (m2, m3), the budget allows 2"],
  },
  {
    name: "the holder Lost itself, room for it: kept",
    budget: 1,
    machines: [asking("m1")],
    turns: [{ machine: "m1" }],
    silent: ["m1"],
    want: [],
  },
  {
    name: "a Machine view older than the Cluster: not started is not believed, kept",
    budget: 3,
    machines: [asking("m1", leader), machine("m2", leader)],
    turns: [{ machine: "m1", leader: true }],
    silent: ["m2"],
    machinesVersion: "99",
    want: [],
  },
  {
    name: "a machine already back on the turn's release has started",
    budget: 3,
    machines: [
      asking("m1", { ...leader, status: { version: V2, step: "UpdatePending" } }),
      machine("m2", leader),
    ],
    turns: [{ machine: "m1", leader: true }],
    silent: ["m2"],
    want: [],
  },
];

describe("a turn not started is taken back when a machine that went down since refuses it", () => {
  it.each(rows)("$name", (row) => {
    const c = cluster({
      maxUnavailable: row.budget,
      turns: row.turns.map((t) => turn(t.machine, { leader: t.leader ?? false })),
    });
    const silentFor = Object.fromEntries((row.silent ?? []).map((n) => [n, 60]));
    const d = decide(
      observed(c, row.machines, {
        silentFor,
        ...(row.machinesVersion === undefined ? {} : { machinesVersion: row.machinesVersion }),
      }),
      SETTINGS,
    );
    const taken = d.releases.filter((r) => r.reason === "Overtaken");
    const said = (r: (typeof taken)[number]): string =>
      `${r.turn.machine}: ${r.message.replace(/^taken back before it started: (.*); it asks again$/, "$1")}`;
    expect(taken.map(said)).toEqual(row.want);
    const held = d.status.rebootTurns?.map((t) => t.machine) ?? [];
    for (const w of row.want) expect(held).not.toContain(w.split(": ")[0]);
    expect(d.grants.map((g) => g.machine)).toEqual([]);
    expect(d.needsFreshMachines).toBe(row.machinesVersion !== undefined);
  });

  it("the turn goes back in the same write that records it, and is not granted again", () => {
    const c = cluster({ maxUnavailable: 3, turns: [turn("m1", { leader: true })] });
    const d = decide(
      observed(c, [asking("m1", leader), machine("m2", leader)], { silentFor: { m2: 60 } }),
      SETTINGS,
    );
    expect(d.changed).toBe(true);
    expect(d.status.rebootTurns).toEqual([]);
    expect(d.blocked).toEqual({ kind: "leader", machine: "m1", down: "m2" });
  });
});
