import { describe, expect, it } from "vitest";
import type { Cluster, RebootTurn } from "../../src/api/types.js";
import { findTurn, turnRequestFor } from "../../src/coordinator/turn.js";

const V2 = { version: "2026.10.12-001", digest: `sha256:${"2".repeat(64)}` };
const V3 = { version: "2026.10.14-001", digest: `sha256:${"3".repeat(64)}` };

function cluster(turns: Partial<RebootTurn>[]): Cluster {
  return {
    apiVersion: "liken.sh/v1alpha1",
    kind: "Cluster",
    metadata: { name: "lab" },
    spec: { releases: { source: "http://x" } },
    status: {
      rebootTurns: turns.map((t) => ({
        machine: "m1",
        grantedAt: "2026-12-02T12:00:00Z",
        grantedBy: "op",
        leader: false,
        version: V2.version,
        ...t,
      })),
    },
  };
}

describe("findTurn", () => {
  it.each([
    ["a record for this machine and release", [{}], true],
    ["a record with the matching digest", [{ digest: V2.digest }], true],
    ["no record", [], false],
    ["a record for another machine", [{ machine: "m2" }], false],
    ["a record for an earlier target", [{ version: V3.version }], false],
    ["a record whose digest differs", [{ digest: V3.digest }], false],
  ] as const)("%s", (_n, turns, want) => {
    expect(findTurn(cluster([...turns]), "m1", V2) !== undefined).toBe(want);
  });

  it("no release staged or no cluster: no turn", () => {
    expect(findTurn(cluster([{}]), "m1", undefined)).toBeUndefined();
    expect(findTurn(undefined, "m1", V2)).toBeUndefined();
  });
});

describe("turnRequestFor", () => {
  const now = new Date("2026-12-02T12:00:00.123Z");
  it("asks with the release and the time, whole seconds", () => {
    expect(turnRequestFor(true, V2, undefined, now)).toEqual({ ...V2, at: "2026-12-02T12:00:00Z" });
  });
  it("keeps the first ask's time while the release is the same", () => {
    const prev = { ...V2, at: "2026-12-02T11:00:00Z" };
    expect(turnRequestFor(true, V2, prev, now)).toBe(prev);
  });
  it("a new release is a new ask", () => {
    const prev = { ...V2, at: "2026-12-02T11:00:00Z" };
    expect(turnRequestFor(true, V3, prev, now)?.version).toBe(V3.version);
  });
  it("not wanting a turn gives it back", () => {
    expect(turnRequestFor(false, V2, { ...V2, at: "x" }, now)).toBeUndefined();
  });
});
