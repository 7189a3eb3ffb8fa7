// A turn whose machine said it started (Updating) but may not be past its drain, when a machine
// that went down since fills the budget (src/operator/turns/paused.ts): kept and paused, never
// taken back; the pause lifts when the rules allow, and once the machine says it waits
// (UpdatePending) the turn is judged as one not started. The simulator found the case (seeds
// 70695 and 90014: the drain announced, a Lost mark the same second, the drain a second later).
import { describe, expect, it } from "vitest";
import type { Machine, MachineStatus, RebootTurn } from "../../src/api/index.js";
import { decide } from "../../src/operator/decide/decide.js";
import { SETTINGS, V2, asking, cluster, machine, observed, turn } from "./operator-fixtures.js";

const leader = { spec: { role: "Leader" as const } };
const announced: Partial<MachineStatus> = { step: "Updating", updateStage: "Draining" };
const pastDrain: Partial<MachineStatus> = { step: "Updating", updateStage: "CheckingSlot" };
const PAUSE = { since: "2026-01-01T00:00:00Z", message: "paused before its drain: earlier" };

interface Row {
  name: string;
  budget: number;
  machines: Machine[];
  turns: RebootTurn[];
  /** Lost (60 s without a renewal). */
  silent: string[];
  /** The machines whose turns are paused after the decision, with the pause's cause. */
  paused: string[];
  /** The turns taken back (Overtaken). */
  taken?: string[];
}

const rows: Row[] = [
  {
    name: "budget 2, both announced, a machine Lost: both paused, neither taken back",
    budget: 2,
    machines: [
      asking("m1", { status: announced }),
      asking("m2", { status: announced }),
      machine("m3"),
    ],
    turns: [turn("m1"), turn("m2")],
    silent: ["m3"],
    paused: [
      "m1: 2 machines are down or hold a turn (m2, m3), the budget allows 2",
      "m2: 2 machines are down or hold a turn (m1, m3), the budget allows 2",
    ],
  },
  {
    name: "one announced, one past its drain, a machine Lost: only the announced one pauses",
    budget: 2,
    machines: [
      asking("m1", { status: announced }),
      asking("m2", { status: pastDrain }),
      machine("m3"),
    ],
    turns: [turn("m1"), turn("m2")],
    silent: ["m3"],
    paused: ["m1: 2 machines are down or hold a turn (m2, m3), the budget allows 2"],
  },
  {
    name: "an announced turn with room for it beside a Lost machine: not paused",
    budget: 2,
    machines: [asking("m1", { status: announced }), machine("m3")],
    turns: [turn("m1")],
    silent: ["m3"],
    paused: [],
  },
  {
    name: "a leader announced, another leader Lost: paused by the leader rule",
    budget: 3,
    machines: [asking("m1", { ...leader, status: announced }), machine("m2", leader)],
    turns: [turn("m1", { leader: true })],
    silent: ["m2"],
    paused: ["m1: leader m2 is down since the grant, and one leader is down at a time"],
  },
  {
    name: "a paused turn whose Lost machine came back: the pause is lifted",
    budget: 2,
    machines: [
      asking("m1", { status: announced }),
      asking("m2", { status: pastDrain }),
      machine("m3"),
    ],
    turns: [turn("m1", { drainPause: PAUSE }), turn("m2")],
    silent: [],
    paused: [],
  },
  {
    name: "a paused machine that says it waits (UpdatePending) is one not started: taken back",
    budget: 2,
    machines: [asking("m1"), asking("m2", { status: pastDrain }), machine("m3")],
    turns: [turn("m1", { drainPause: PAUSE }), turn("m2")],
    silent: ["m3"],
    paused: [],
    taken: ["m1"],
  },
  {
    name: "a paused machine back on the turn's release is past its drain: the pause is lifted",
    budget: 2,
    machines: [
      asking("m1", { status: { version: V2, step: "Updating" } }),
      asking("m2", { status: pastDrain }),
      machine("m3"),
    ],
    turns: [turn("m1", { drainPause: PAUSE }), turn("m2")],
    silent: ["m3"],
    paused: [],
  },
];

describe("a started turn that may be before its drain pauses while the budget is full", () => {
  it.each(rows)("$name", (row) => {
    const c = cluster({ maxUnavailable: row.budget, turns: row.turns });
    const silentFor = Object.fromEntries(row.silent.map((n) => [n, 60]));
    const d = decide(observed(c, row.machines, { silentFor }), SETTINGS);
    const turns = d.status.rebootTurns ?? [];
    const paused = turns
      .filter((t) => t.drainPause !== undefined)
      .map(
        (t) => `${t.machine}: ${t.drainPause!.message.replace(/^paused before its drain: /, "")}`,
      );
    expect(paused).toEqual(row.paused);
    const taken = d.releases.filter((r) => r.reason === "Overtaken").map((r) => r.turn.machine);
    expect(taken).toEqual(row.taken ?? []);
    expect(d.grants).toEqual([]);
  });

  it("a pause keeps its time and is announced once, when it begins", () => {
    const c = cluster({
      maxUnavailable: 1,
      turns: [turn("m1")],
    });
    const machines = [asking("m1", { status: announced }), machine("m3")];
    const first = decide(observed(c, machines, { silentFor: { m3: 60 } }), SETTINGS);
    expect(first.paused.map((t) => t.machine)).toEqual(["m1"]);
    const since = first.status.rebootTurns?.[0]?.drainPause?.since;
    expect(since).toBeDefined();
    const again = decide(
      observed(cluster({ maxUnavailable: 1, turns: first.status.rebootTurns ?? [] }), machines, {
        silentFor: { m3: 60 },
      }),
      SETTINGS,
    );
    expect(again.paused).toEqual([]);
    expect(again.status.rebootTurns?.[0]?.drainPause?.since).toBe(since);
  });
});
