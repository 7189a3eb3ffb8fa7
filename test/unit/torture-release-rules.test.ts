// The torture's recall and floor rules (src/torture/recall-rules.ts, revert-rules.ts), on
// hand-made histories: each rule fires on the act it names and not on what comes before.
import { describe, expect, it } from "vitest";
import type { Cluster, Machine } from "../../src/api/types.js";
import type { Observation } from "../../src/invariants/index.js";
import {
  AGENT_LOOK_MS,
  recallViolations,
  type RecallMark,
} from "../../src/torture/recall-rules.js";
import { belowFloor } from "../../src/torture/revert-rules.js";

const R = { version: "2026.10.12-001", digest: "sha256:r" };
const T = Date.parse("2026-12-05T12:00:00.000Z");
const mark: RecallMark = { release: R, signedAt: T, boundAt: T + 35_000 };
const iso = (ms: number): string => new Date(ms).toISOString().replace(/\.\d{3}Z$/, "Z");

function cluster(at: number, o: { recalled?: boolean; turns?: [string, number][] }): Observation {
  const c = {
    metadata: { name: "lab" },
    spec: { releases: { source: "http://x/" } },
    status: {
      ...(o.recalled ? { trust: { mode: "channel", recalls: [R] } } : {}),
      rebootTurns: (o.turns ?? []).map(([machine, g]) => ({
        machine,
        version: R.version,
        digest: R.digest,
        grantedAt: iso(g),
      })),
    },
  } as unknown as Cluster;
  return { kind: "cluster", at, cluster: c };
}

const arm = (at: number, machine = "node-1"): Observation => ({
  kind: "arm",
  at,
  machine,
  bootId: "b",
  slot: "b",
  release: R,
});

describe("the recall rules", () => {
  it("hold when the operator shows the recall in time and grants nothing for it after", () => {
    const h = [
      cluster(T - 5_000, { turns: [["node-1", T - 5_000]] }),
      arm(T - 1_000), // armed before the recall: allowed
      cluster(T + 6_000, { recalled: true, turns: [["node-1", T - 5_000]] }),
      arm(T + 6_000 + AGENT_LOOK_MS - 1, "node-2"), // a tick begun before it was shown
    ];
    expect(recallViolations(h, mark, [])).toEqual([]);
  });

  it("recalled-release-granted: a turn granted after the recall was shown", () => {
    const h = [
      cluster(T + 6_000, { recalled: true }),
      cluster(T + 9_000, { recalled: true, turns: [["node-2", T + 8_000]] }),
      cluster(T + 10_000, { recalled: true, turns: [["node-2", T + 8_000]] }),
    ];
    const v = recallViolations(h, mark, []);
    expect(v.map((x) => [x.rule, x.machine])).toEqual([["recalled-release-granted", "node-2"]]);
  });

  it("recall-not-shown and granted after the bound: an operator that ignores recalls", () => {
    const h = [cluster(T + 40_000, { turns: [["node-3", T + 39_000]] })];
    const v = recallViolations(h, mark, []);
    expect(v.map((x) => x.rule)).toEqual(["recall-not-shown", "recalled-release-granted"]);
    expect(v[0]!.message).toContain("none ever did");
  });

  it("recalled-release-rebooted: an arm an agent's look after it was shown, unless paused", () => {
    const shown = cluster(T + 6_000, { recalled: true });
    const late = arm(T + 6_000 + AGENT_LOOK_MS + 1);
    expect(recallViolations([shown, late], mark, []).map((x) => x.rule)).toEqual([
      "recalled-release-rebooted",
    ]);
    const paused = [{ machine: "node-1", from: T, to: T + 20_000 }];
    expect(recallViolations([shown, late], mark, paused)).toEqual([]);
  });
});

function machine(at: number, name: string, version: string): Observation {
  const m = { metadata: { name }, spec: {}, status: { version } } as unknown as Machine;
  return { kind: "machine", at, machine: m };
}

describe("the floor rule", () => {
  const floor = "2026.10.10-001";
  it("holds for machines at or above the floor, and for one never above it", () => {
    const h = [
      machine(1, "node-1", "2026.10.12-001"),
      machine(2, "node-1", "2026.10.10-001"),
      machine(3, "node-2", "2026.10.09-001"),
    ];
    expect(belowFloor(h, floor, 0)).toEqual([]);
  });

  it("revert-below-floor: a machine that ran at or above the floor read below it after `from`", () => {
    const h = [
      machine(1, "node-1", "2026.10.12-001"),
      machine(5, "node-1", "2026.10.09-001"),
      machine(6, "node-1", "2026.10.09-001"),
    ];
    expect(belowFloor(h, floor, 0).map((x) => [x.rule, x.machine, x.at])).toEqual([
      ["revert-below-floor", "node-1", 5],
    ]);
    expect(belowFloor(h, floor, 10)).toEqual([]);
  });
});
