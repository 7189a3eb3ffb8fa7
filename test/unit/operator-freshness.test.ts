// Turn records and stale caches: a copy that just won a 409 (the Cluster read fresh) or just
// woke from a pause may hold a Machine cache older than the Cluster. A record another copy
// granted to a machine this cache has not seen ask (or not seen at all) must not be released
// as GivenBack or MachineDeleted on that view: the decision keeps it and asks for a fresh read.
import { describe, expect, it } from "vitest";
import { decide } from "../../src/operator/decide/decide.js";
import { seenUpTo } from "../../src/operator/view/freshness.js";
import {
  GRANTED,
  SETTINGS,
  V2,
  asking,
  back,
  cluster,
  failedTrial,
  machine,
  observed,
  turn,
} from "./operator-fixtures.js";

describe("seenUpTo: resourceVersions as etcd revisions", () => {
  it.each<[string | undefined, string | undefined, boolean]>([
    ["100", "100", true],
    ["101", "100", true],
    ["99", "100", false],
    // Numbers, not text: "99" < "100" as text would read a stale view as fresh.
    ["1000", "999", true],
    ["999", "1000", false],
    ["18446744073709551616", "18446744073709551615", true],
    [undefined, "100", false],
    ["", "100", false],
    ["100", undefined, false],
    ["rv-a", "100", false],
  ])("view %s, decision %s: %s", (view, decision, want) => {
    expect(seenUpTo(view, decision)).toBe(want);
  });
});

describe("a release decided on what the Machines no longer say waits for a fresh view", () => {
  // The Cluster of the tables is at resourceVersion "100".
  const STALE = "99";
  const FRESH = "100";
  const held = turn("m1", { grantedAt: GRANTED });

  const cases = [
    {
      name: "the machine is not in the view (MachineDeleted)",
      machines: [],
      reason: "MachineDeleted",
    },
    {
      name: "the machine does not ask in the view (GivenBack)",
      machines: [machine("m1", { status: { step: "Ready" } })],
      reason: "GivenBack",
    },
  ];
  it.each(cases)("$name: kept on a stale view, released on a fresh one", ({ machines, reason }) => {
    const c = cluster({ turns: [held] });
    const stale = decide(observed(c, machines, { machinesVersion: STALE }), SETTINGS);
    expect(stale.releases).toEqual([]);
    expect(stale.status.rebootTurns).toEqual([held]);
    expect(stale.needsFreshMachines).toBe(true);
    // Nothing granted in its place either: the record still counts against the budget.
    const other = asking("m2");
    const d2 = decide(observed(c, [...machines, other], { machinesVersion: STALE }), SETTINGS);
    expect(d2.grants).toEqual([]);

    const fresh = decide(observed(c, machines, { machinesVersion: FRESH }), SETTINGS);
    expect(fresh.releases).toMatchObject([{ reason, turn: { machine: "m1" } }]);
    expect(fresh.needsFreshMachines).toBe(false);
  });

  it.each([
    ["Returned", back("m1")],
    [
      "RolledBack",
      machine("m1", { status: { step: "Failed", lastTrial: failedTrial({ version: V2 }) } }),
    ],
  ] as const)("%s rests on what the machine says: decided on any view", (reason, m) => {
    const c = cluster({ turns: [held] });
    const d = decide(observed(c, [m], { machinesVersion: STALE }), SETTINGS);
    expect(d.releases).toMatchObject([{ reason }]);
    expect(d.needsFreshMachines).toBe(false);
  });

  it("a view of unknown age is not fresh", () => {
    const c = cluster({ turns: [held] });
    const d = decide(observed(c, [], { machinesVersion: "" }), SETTINGS);
    expect(d.releases).toEqual([]);
    expect(d.needsFreshMachines).toBe(true);
  });
});
