// Fleet-wide revert and pause (src/operator/revert/revert.ts, src/release-decision/view.ts, decide.ts): which
// release is known good, when a revert begins (a request, the threshold), where it goes, the
// floor, the revoked list, a revert racing a new spec.version, and the pause. Tables through
// decide(), so each rule is seen where it acts: the status written and the turns granted.
import { describe, expect, it } from "vitest";
import {
  type Cluster,
  type ClusterStatus,
  type Machine,
  type RevertRecord,
} from "../../src/api/index.js";
import { effectiveTarget, targetView } from "../../src/release-decision/view.js";
import { decide, type Decision } from "../../src/operator/decide/decide.js";
import {
  failureReasonOf,
  gateOf,
  recordReasonOf,
  type FloorRead,
} from "../../src/operator/revert/revert.js";
import { valueOf } from "../../src/operator/revert/prom-check.js";
import {
  D1,
  D2,
  NOW,
  SETTINGS,
  V1,
  V2,
  V3,
  asking,
  back,
  cluster,
  failedTrial,
  iso,
  machine,
  observed,
  progressing,
  turn,
  withSpec,
} from "./operator-fixtures.js";

const GOOD_V1 = { version: V1, digest: D1, since: iso(NOW, -86_400 * 2) };
const GOOD_V2 = { version: V2, digest: D2, since: iso(NOW, -3600) };
/** The fleet promoted V1, then V2: V2 is the last known good, V1 the one before. */
const PROMOTED: ClusterStatus = { lastKnownGood: GOOD_V2, priorKnownGood: GOOD_V1 };
const NO_FLOOR = new Map<string, FloorRead>([[D2, { kind: "read" }]]);

/** The revert of V2 to V1 a person asked for, recorded `ago` seconds before NOW. */
const revertOfV2 = (ago: number): RevertRecord => ({
  from: { version: V2, digest: D2 },
  to: { version: V1, digest: D1 },
  trigger: "Request",
  message: "m",
  by: "alice",
  at: iso(NOW, -ago),
});

/** A machine on V2 whose other slot holds V1 (staged `ago` s before NOW), asking for a turn. */
const asksForV1 = (name: string, ago: number): Machine =>
  machine(name, {
    spec: { rebootPolicy: "Auto" },
    status: {
      version: V2,
      digest: D2,
      step: "UpdatePending",
      staged: { version: V1, digest: D1, slot: "a", at: iso(NOW, -ago) },
      turnRequest: { version: V1, digest: D1, at: iso(NOW, -ago) },
    },
  });

const reverted = (d: Decision) => d.status.conditions?.find((c) => c.type === "Reverted");

function run(
  c: Cluster,
  machines: Machine[],
  floors: ReadonlyMap<string, FloorRead> = NO_FLOOR,
): Decision {
  return decide({ ...observed(c, machines), floors }, SETTINGS);
}

const request = (over: Partial<{ version: string; digest: string }> = {}) => ({
  version: V2,
  digest: D2,
  reason: "NIC drops packets",
  by: "alice",
  at: iso(NOW, -5),
  ...over,
});

describe("lastKnownGood: every machine promoted the target, nothing in flight", () => {
  const rows: [string, Cluster, Machine[], string | undefined, string | undefined][] = [
    ["all back on V2, Ready, no turn", cluster(), [back("m1"), back("m2")], V2, undefined],
    [
      "the one before moves to priorKnownGood",
      cluster({ status: { lastKnownGood: GOOD_V1 } }),
      [back("m1"), back("m2")],
      V2,
      V1,
    ],
    ["one still on V1", cluster(), [back("m1"), machine("m2")], undefined, undefined],
    [
      "a turn still held (soaking)",
      cluster({ turns: [turn("m1", { returnedAt: iso(NOW, -5) })] }),
      [back("m1"), back("m2")],
      undefined,
      undefined,
    ],
    [
      "a machine not Ready",
      cluster(),
      [back("m1"), machine("m2", { status: { version: V2, digest: D2, step: "Updating" } })],
      undefined,
      undefined,
    ],
  ];
  it.each(rows)("%s", (_, c, machines, lkg, prior) => {
    const c2 = withSpec(c, { rollout: { soakSeconds: 60 } });
    const d = run(c2, machines);
    expect(d.status.lastKnownGood?.version).toBe(lkg);
    expect(d.status.priorKnownGood?.version).toBe(prior);
  });

  it("keeps since when it is already the last known good", () => {
    const d = run(cluster({ status: PROMOTED }), [back("m1")]);
    expect(d.status.lastKnownGood).toEqual(GOOD_V2);
  });
});

describe("a revert by request: spec.rollout.revertRequest", () => {
  const c = (status: ClusterStatus = PROMOTED, req = request()) =>
    withSpec(cluster({ status }), { rollout: { revertRequest: req } });

  it("starts: the target becomes the known good before it, the release is revoked", () => {
    const d = run(c(), [back("m1"), back("m2")]);
    expect(d.revertStarted).toMatchObject({
      from: { version: V2, digest: D2 },
      to: { version: V1, digest: D1 },
      trigger: "Request",
      by: "alice",
    });
    expect(d.status.revokedReleases).toEqual([
      expect.objectContaining({ version: V2, digest: D2, reason: "RevertedByRequest" }),
    ]);
    expect(reverted(d)).toMatchObject({ status: "True", reason: "RevertedByRequest" });
    expect(reverted(d)?.message).toContain("NIC drops packets");
    expect(effectiveTarget({ ...c(), status: d.status })).toEqual({ version: V1, digest: D1 });
  });

  it("mid-rollout (V2 not yet known good) goes back to lastKnownGood itself", () => {
    const d = run(c({ lastKnownGood: GOOD_V1 }), [back("m1"), machine("m2")]);
    expect(d.revertStarted?.to).toEqual({ version: V1, digest: D1 });
  });

  it("grants turns for the release it goes back to in the same decision, none for the one it leaves", () => {
    // m1 runs V2 and staged V1 in its other slot (it holds it from before): it asks for V1.
    const m1 = asksForV1("m1", 2);
    const d = run(c(), [m1, asking("m2")]);
    expect(d.grants.map((g) => [g.machine, g.version])).toEqual([["m1", V1]]);
  });

  it("refuses below the floor the release declares, and says so", () => {
    const floors = new Map<string, FloorRead>([[D2, { kind: "read", floor: "2026.10.11-001" }]]);
    const d = run(c(), [back("m1")], floors);
    expect(d.revertStarted).toBeUndefined();
    expect(d.status.revert).toBeUndefined();
    expect(d.status.revokedReleases).toBeUndefined();
    expect(reverted(d)).toMatchObject({ status: "False", reason: "RevertBelowFloor" });
    expect(reverted(d)?.message).toContain("revertFloor 2026.10.11-001");
  });

  it("a floor at or below the known good allows it", () => {
    const floors = new Map<string, FloorRead>([[D2, { kind: "read", floor: V1 }]]);
    expect(run(c(), [back("m1")], floors).revertStarted?.to.version).toBe(V1);
  });

  it("waits for the floor to be read, and asks for it", () => {
    const d = run(c(), [back("m1")], new Map());
    expect(d.revertStarted).toBeUndefined();
    expect(d.floorWanted).toEqual({ version: V2, digest: D2 });
    expect(reverted(d)?.reason).toBe("RevertFloorUnread");
  });

  it("an unreadable floor reverts nothing", () => {
    const floors = new Map<string, FloorRead>([[D2, { kind: "unread", message: "GET ...: 404" }]]);
    const d = run(c(), [back("m1")], floors);
    expect(d.revertStarted).toBeUndefined();
    expect(reverted(d)?.message).toContain("could not be read (GET ...: 404)");
  });

  it("no known good release other than the one to leave: NoKnownGood", () => {
    const d = run(c({ lastKnownGood: GOOD_V2 }), [back("m1")]);
    expect(d.revertStarted).toBeUndefined();
    expect(reverted(d)?.reason).toBe("NoKnownGood");
  });

  it("a request for another release than spec.version's is stale: spec.version wins", () => {
    const d = run(withSpec(c(PROMOTED, request()), { version: V3 }), [back("m1")]);
    expect(d.revertStarted).toBeUndefined();
    expect(reverted(d)?.reason).toBe("RevertRequestStale");
    expect(reverted(d)?.message).toContain(`spec.version names ${V3}`);
  });

  it("a revert in force is not started again (the second copy finds it recorded)", () => {
    const first = run(c(), [back("m1")]);
    const again = run({ ...c(), status: first.status }, [back("m1")]);
    expect(again.revertStarted).toBeUndefined();
    expect(again.status.revokedReleases).toHaveLength(1);
    expect(reverted(again)?.reason).toBe("RevertedByRequest");
  });
});

describe("the target while a revert is recorded (src/release-decision/view.ts)", () => {
  const revert = revertOfV2(10);
  const revoked = [{ version: V2, digest: D2, reason: "RevertedByRequest", at: iso(NOW, -10) }];

  it.each([
    [
      "spec.version names the release left: the revert's target",
      V2,
      { revert, revokedReleases: revoked },
      "revert",
      V1,
    ],
    [
      "spec.version moved on (a new target wins the race)",
      V3,
      { revert, revokedReleases: revoked },
      "spec",
      V3,
    ],
    [
      "spec.version set to the good release (GitOps caught up)",
      V1,
      { revert, revokedReleases: revoked },
      "spec",
      V1,
    ],
    [
      "a revoked release without a revert: no target",
      V2,
      { revokedReleases: revoked },
      "revoked",
      undefined,
    ],
  ] as const)("%s", (_, version, status, kind, target) => {
    const c = cluster({
      version,
      status: { ...status, revokedReleases: [...status.revokedReleases] },
    });
    expect(targetView(c).kind).toBe(kind);
    expect(effectiveTarget(c)?.version).toBe(target);
  });

  it("a revoked spec.version: Progressing False ReleaseRevoked, STATUS ReleaseRevoked, no grant", () => {
    const c = cluster({ status: { revokedReleases: [...revoked] } });
    const d = run(c, [asking("m1")]);
    expect(d.grants).toEqual([]);
    expect(progressing(d)).toMatchObject({ status: "False", reason: "ReleaseRevoked" });
    expect(progressing(d)?.message).toContain(`liken rollout unrevoke lab ${V2}`);
    expect(d.status.display).toBe("ReleaseRevoked");
  });

  it("a new spec.version after a revert ends it with a clear reason", () => {
    const c = cluster({ version: V3, status: { revert, revokedReleases: [...revoked] } });
    const d = run(c, [machine("m1")]);
    expect(reverted(d)).toMatchObject({ status: "False", reason: "RevertSuperseded" });
    expect(reverted(d)?.message).toContain(`spec.version names ${V3}`);
  });
});

describe("a revert by itself: spec.rollout.revert", () => {
  const failed = (name: string) =>
    machine(name, {
      status: { version: V1, digest: D1, step: "Failed", lastTrial: failedTrial() },
    });
  const policy = (p: NonNullable<NonNullable<Cluster["spec"]["rollout"]>["revert"]>) =>
    withSpec(cluster({ status: { lastKnownGood: GOOD_V1 } }), {
      rollout: { maxFailedTrials: 0, revert: p },
    });

  it.each([
    ["2 failed, maxFailures 2", { maxFailures: 2 }, 2, true],
    ["1 failed, maxFailures 2", { maxFailures: 2 }, 1, false],
    ["2 of 4 took it failed: 50 %, maxFailurePercent 50", { maxFailurePercent: 50 }, 2, true],
    ["1 of 3 took it failed: 33 %, maxFailurePercent 50", { maxFailurePercent: 50 }, 1, false],
  ] as const)("%s", (_, p, failures, reverts) => {
    const fleet = [
      ...Array.from({ length: failures }, (_x, i) => failed(`f${i}`)),
      back("ok1"),
      back("ok2"),
      machine("behind"),
    ];
    const d = run(policy(p), fleet);
    expect(d.revertStarted !== undefined).toBe(reverts);
    if (reverts) {
      expect(d.revertStarted).toMatchObject({ trigger: "Automatic", by: "op-a" });
      expect(d.revertStarted?.message).toContain("f0 (TrialFellBack");
      expect(d.revertStarted).toMatchObject({
        reason: "RevertedOnFailedTrials",
        gate: "trial TrialFellBack",
      });
      expect(reverted(d)?.reason).toBe("RevertedOnFailedTrials");
    }
  });

  it("past the watch window after it became known good, failures no longer revert it", () => {
    const c = withSpec(
      cluster({
        status: { lastKnownGood: { ...GOOD_V2, since: iso(NOW, -7200) }, priorKnownGood: GOOD_V1 },
      }),
      { rollout: { maxFailedTrials: 0, revert: { maxFailures: 1, watchSeconds: 3600 } } },
    );
    expect(run(c, [failed("f0"), back("m1")]).revertStarted).toBeUndefined();
    const inside = withSpec(c, {
      rollout: { maxFailedTrials: 0, revert: { maxFailures: 1, watchSeconds: 10_800 } },
    });
    expect(run(inside, [failed("f0"), back("m1")]).revertStarted?.to.version).toBe(V1);
  });
});

describe("a revert by itself on post-promotion health (the gates run again after promotion)", () => {
  /** A machine that promoted V2 (back on it) and whose gates then ran again on this boot. */
  const checked = (name: string, result: "Passed" | "Failed", of = { version: V2, digest: D2 }) =>
    machine(name, {
      status: {
        ...back(name).status,
        postPromotionHealth: {
          ...of,
          bootID: `boot-${name}`,
          result,
          ...(result === "Failed" ? { gate: "nic-ping", message: "exit 1" } : {}),
          at: iso(NOW, -60),
        },
      },
    });
  const promoted = withSpec(cluster({ status: PROMOTED }), {
    rollout: { maxFailedTrials: 0, revert: { maxFailures: 2, watchSeconds: 10_800 } },
  });

  it.each([
    ["2 of 3 failed their gates on V2, maxFailures 2", ["Failed", "Failed", "Passed"], V2, true],
    ["1 of 3 failed, maxFailures 2", ["Failed", "Passed", "Passed"], V2, false],
    ["3 passed", ["Passed", "Passed", "Passed"], V2, false],
    [
      "2 failed on V1, not on V2: the verdict names another release",
      ["Failed", "Failed", "Passed"],
      V1,
      false,
    ],
  ] as const)("%s", (_, results, on, reverts) => {
    const of = on === V2 ? { version: V2, digest: D2 } : { version: V1, digest: D1 };
    const fleet = results.map((r, i) => checked(`m${i}`, r, of));
    const d = run(promoted, fleet);
    expect(d.revertStarted !== undefined).toBe(reverts);
    if (reverts) {
      expect(d.revertStarted).toMatchObject({ trigger: "Automatic", to: { version: V1 } });
      expect(d.revertStarted?.message).toContain("m0 (PostPromotionHealthFailed gate nic-ping");
      expect(d.revertStarted).toMatchObject({ reason: "RevertedOnHealthGate", gate: "nic-ping" });
      expect(reverted(d)?.reason).toBe("RevertedOnHealthGate");
    }
  });
});

describe("the pause: spec.rollout.paused", () => {
  it("grants nothing, reads RolloutPaused, and turns held stay", () => {
    const c = withSpec(cluster({ maxUnavailable: 2, turns: [turn("m1")] }), {
      rollout: { paused: true },
    });
    const d = run(c, [machine("m1", { status: { step: "Updating" } }), asking("m2")]);
    expect(d.grants).toEqual([]);
    expect(d.status.rebootTurns?.map((t) => t.machine)).toEqual(["m1"]);
    expect(progressing(d)).toMatchObject({ status: "True", reason: "RolloutPaused" });
    expect(progressing(d)?.message).toContain("liken rollout resume lab");
    expect(d.status.display).toBe("RolloutPaused");
  });

  it("resumed, the same fleet gets its turn", () => {
    const c = withSpec(cluster({ maxUnavailable: 2 }), { rollout: { paused: false } });
    expect(run(c, [asking("m2")]).grants.map((g) => g.machine)).toEqual(["m2"]);
  });
});

describe("a revert by itself: spec.rollout.revert.prometheus", () => {
  const check = {
    url: "http://prom:9090",
    query: "max(nic_drop_ratio)",
    maxValue: 0.5,
    failureLimit: 3,
  };
  const c = (since = iso(NOW, -3600)) =>
    withSpec(
      cluster({ status: { lastKnownGood: { ...GOOD_V2, since }, priorKnownGood: GOOD_V1 } }),
      {
        rollout: { revert: { prometheus: check, watchSeconds: 86_400 } },
      },
    );
  const runWith = (cl: Cluster, failures: number) =>
    decide(
      {
        ...observed(cl, [back("m1"), back("m2")]),
        floors: NO_FLOOR,
        queryChecks: new Map([[D2, { failures, last: "returned 0.9 > maxValue 0.5" }]]),
      },
      SETTINGS,
    );

  it.each([
    [2, false],
    [3, true],
  ])("%i failed checks in a row of failureLimit 3: reverts %s", (failures, reverts) => {
    const d = runWith(c(), failures);
    expect(d.revertStarted !== undefined).toBe(reverts);
    if (reverts) {
      expect(d.revertStarted?.message).toContain("query max(nic_drop_ratio) at http://prom:9090");
      expect(d.revertStarted?.message).toContain("returned 0.9 > maxValue 0.5");
      expect(d.revertStarted).toMatchObject({
        reason: "RevertedOnPrometheusQuery",
        gate: "prometheus",
      });
    }
  });

  it("asks for the check while the release is watched, not after", () => {
    expect(runWith(c(), 0).queryWanted).toEqual({ release: { version: V2, digest: D2 }, check });
    const old = runWith(c(iso(NOW, -90_000)), 5);
    expect(old.queryWanted).toBeUndefined();
    expect(old.revertStarted).toBeUndefined();
  });
});

describe("what tripped an automatic revert: the condition's reason and the gate", () => {
  const trial = (machine: string, reason = "TrialFellBack") => ({ machine, reason, at: "t" });
  const health = (machine: string, gate?: string) => ({
    machine,
    reason: "PostPromotionHealthFailed",
    at: "t",
    ...(gate === undefined ? {} : { gate }),
  });
  it.each([
    [
      "failed trials only",
      [trial("a"), trial("b")],
      "RevertedOnFailedTrials",
      "trial TrialFellBack",
    ],
    [
      "a trial's own gate failed",
      [trial("a", "HealthCheckFailed")],
      "RevertedOnFailedTrials",
      "trial HealthCheckFailed",
    ],
    [
      "health gates only: the gate most machines failed",
      [health("a", "command disk"), health("b", "command nic"), health("c", "command nic")],
      "RevertedOnHealthGate",
      "command nic",
    ],
    [
      "a tie: the gate named first",
      [health("a", "command disk"), health("b", "command nic")],
      "RevertedOnHealthGate",
      "command disk",
    ],
    ["a verdict without its gate", [health("a")], "RevertedOnHealthGate", "health"],
    [
      "trials and health together",
      [trial("a"), health("b", "command nic"), health("c", "command nic")],
      "RevertedAutomatically",
      "command nic",
    ],
  ] as const)("%s", (_, failed, reason, gate) => {
    expect(failureReasonOf(failed)).toBe(reason);
    expect(gateOf(failed)).toBe(gate);
  });

  it("a record written before the reason was kept reads its reason from the trigger", () => {
    const r = { from: GOOD_V2, to: GOOD_V1, message: "m", by: "op", at: "t" };
    expect(recordReasonOf({ ...r, trigger: "Request" })).toBe("RevertedByRequest");
    expect(recordReasonOf({ ...r, trigger: "Automatic" })).toBe("RevertedAutomatically");
    const kept = { ...r, trigger: "Automatic", reason: "RevertedOnHealthGate" } as const;
    expect(recordReasonOf(kept)).toBe("RevertedOnHealthGate");
  });
});

describe("a Prometheus answer's value (prom-check.ts valueOf)", () => {
  it.each([
    ["scalar", [1, "0.7"], { kind: "value", value: 0.7 }],
    ["vector", [{ value: [1, "0.2"] }, { value: [1, "3"] }], { kind: "value", value: 3 }],
    ["vector", [], { kind: "none", message: "the query returned no sample" }],
    [
      "matrix",
      [],
      { kind: "none", message: "the query returned a matrix result, not a vector or scalar" },
    ],
    ["scalar", [1, "NaNx"], { kind: "none", message: "not a number: NaNx" }],
  ] as const)("%s %j", (type, result, want) => {
    expect(valueOf(type, result)).toEqual(want);
  });
});

describe("a person clears a revocation: spec.rollout.unrevoke", () => {
  const revoked = (at: string) => [{ version: V2, digest: D2, reason: "RevertedByRequest", at }];
  const revert = revertOfV2(60);
  const unrevoke = { version: V2, digest: D2, by: "bob", at: iso(NOW, -30) };

  it("clears what was revoked, reverted and requested before it: V2 is the target again", () => {
    const c = withSpec(
      cluster({ status: { ...PROMOTED, revert, revokedReleases: revoked(iso(NOW, -60)) } }),
      {
        rollout: { unrevoke, revertRequest: { ...request(), at: iso(NOW, -61) } },
      },
    );
    const d = run(c, [back("m1")]);
    expect(d.status.revokedReleases).toEqual([]);
    expect(d.status.revert).toBeUndefined();
    expect(d.revertStarted).toBeUndefined(); // the old request is not acted on again
    expect(d.changed).toBe(true);
    expect(effectiveTarget({ ...c, status: d.status })).toEqual({ version: V2, digest: D2 });
  });

  it("a revocation after it stands", () => {
    const c = withSpec(cluster({ status: { revokedReleases: revoked(iso(NOW, -10)) } }), {
      rollout: { unrevoke },
    });
    const d = run(c, [back("m1")]);
    expect(d.status.revokedReleases?.map((r) => r.version)).toEqual([V2]);
    expect(progressing(d)?.reason).toBe("ReleaseRevoked");
  });
});

describe("a revert target that fails its own trial stops with the brake", () => {
  it("ReleaseFailed for the release gone back to, no further turn", () => {
    const revert = revertOfV2(600);
    const c = cluster({
      status: {
        revert,
        revokedReleases: [{ ...revert.from, reason: "RevertedByRequest", at: revert.at }],
      },
    });
    const fellBack = machine("m1", {
      status: {
        version: V2,
        digest: D2,
        step: "Failed",
        lastTrial: failedTrial({ version: V1, digest: D1, slot: "a" }),
      },
    });
    const waiting = asksForV1("m2", 300);
    const d = run(c, [fellBack, waiting]);
    expect(d.grants).toEqual([]);
    expect(progressing(d)).toMatchObject({ status: "False", reason: "ReleaseFailed" });
    expect(progressing(d)?.message).toContain(`failed their trial of ${V1}`);
  });
});
