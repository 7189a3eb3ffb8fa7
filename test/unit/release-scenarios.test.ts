// Issue 38's scenarios 2.1 to 2.5 where they meet, through decide() (the grants, the revert,
// the conditions written) and follow.ts: each fails with its fix removed (docs/testing.md).
// 2.6 (a clock that ran ahead) is in test/unit/release-decide.test.ts (clockVerdict) and
// test/integration/operator-trust.test.ts; 2.3's condition on the real channel too.
import { describe, expect, it } from "vitest";
import type { Cluster, ClusterStatus, Machine, RevertRecord } from "../../src/api/types.js";
import { decide } from "../../src/operator/decide/decide.js";
import { decideFollow } from "../../src/operator/channel/follow.js";
import type { ChannelRelease } from "../../src/verify/tuf-target.js";
import {
  D2,
  NOW,
  SETTINGS,
  V1,
  V2,
  V3,
  failedTrial,
  iso,
  machine,
  observed,
  progressing,
  withSpec,
  cluster as pinnedCluster,
} from "./operator-fixtures.js";
import {
  NO_FLOORS,
  R1,
  R2,
  R3,
  asksFor,
  condition,
  following,
  granted,
  reverted,
  run,
} from "./release-fixtures.js";

const revertRecord = (from = R2, to = R1): RevertRecord => ({
  from,
  to,
  trigger: "Automatic",
  reason: "RevertedOnFailedTrials",
  message: "2 of 3 machine(s) that took it failed",
  by: "op-a",
  at: iso(NOW, -300),
});
const revokedEntry = (r = R2) => ({ ...r, reason: "RevertedOnFailedTrials", at: iso(NOW, -300) });

describe("2.1 a recall of the release reverted FROM", () => {
  // The fleet reverts V2 to V1; one machine is back on V1, one still on V2 asks for V1. Then
  // the channel recalls V2: the target is taken away from the trust status (no turn for V2).
  const recalledV2 = following(
    {
      taken: R2,
      recalled: { version: V2, reason: "kernel panics" },
      recalls: [{ ...R2, reason: "kernel panics" }],
    },
    {
      revert: revertRecord(),
      revokedReleases: [revokedEntry()],
      lastKnownGood: { ...R1, since: iso(NOW, -86_400) },
      conditions: [condition("ChannelTrusted", "False", "ReleaseRecalled")],
    },
  );
  const fleet = [machine("m1", { status: { ...R1, step: "Ready" } }), asksFor("m2", R2, R1)];

  it("does not cancel the revert half-way: the machine still on V2 gets its turn to V1", () => {
    const d = run(recalledV2, fleet);
    expect(granted(d)).toEqual([`m2->${V1}`]);
    expect(d.status.revert).toEqual(revertRecord());
    expect(reverted(d)).toMatchObject({ status: "True" });
  });

  it("a `liken rollout revert` filed after the recall is honoured", () => {
    // No revert yet: V2 was taken and recalled, a person asks to revert it.
    const c = following(
      {
        taken: R2,
        recalled: { version: V2, reason: "kernel panics" },
        recalls: [{ ...R2, reason: "kernel panics" }],
      },
      {
        lastKnownGood: { ...R1, since: iso(NOW, -86_400) },
        conditions: [condition("ChannelTrusted", "False", "ReleaseRecalled")],
      },
    );
    c.spec.rollout = {
      revertRequest: { ...R2, by: "alice", at: iso(NOW, -10), reason: "recalled" },
    };
    const d = run(c, fleet);
    expect(d.revertStarted).toMatchObject({ from: R2, to: R1, trigger: "Request" });
    expect(reverted(d)).toMatchObject({ status: "True", reason: "RevertedByRequest" });
    expect(granted(d)).toEqual([`m2->${V1}`]);
  });
});

describe("a hold's named action works: NotVouched names `liken rollout revert`", () => {
  // The followed release V2, taken, left the signed targets (NotInChannel): the fleet holds, and
  // the hold tells a person to revert. The request must start the revert, not be dropped.
  const notVouched = (): Cluster =>
    following(
      { taken: R2 },
      {
        lastKnownGood: { ...R1, since: iso(NOW, -86_400) },
        conditions: [condition("ChannelTrusted", "False", "NotInChannel")],
      },
    );
  const fleet = [machine("m1", { status: { ...R1, step: "Ready" } }), asksFor("m2", R2, R1)];

  it("holds, and says to revert", () => {
    const d = run(notVouched(), fleet);
    expect(granted(d)).toEqual([]);
    expect(progressing(d)?.message).toContain("liken rollout revert");
  });

  it("a `liken rollout revert` of the held release starts the revert", () => {
    const c = notVouched();
    c.spec.rollout = { revertRequest: { ...R2, by: "alice", at: iso(NOW, -10) } };
    const d = run(c, fleet);
    expect(d.revertStarted).toMatchObject({ from: R2, to: R1, trigger: "Request" });
    expect(reverted(d)).toMatchObject({ status: "True", reason: "RevertedByRequest" });
    expect(granted(d)).toEqual([`m2->${V1}`]);
  });
});

describe("2.2 a revert to a last known good recalled since", () => {
  const base = (status: ClusterStatus): Cluster =>
    following(
      { target: R3, taken: R3, recalls: [{ ...R2, reason: "bad disk driver" }] },
      { conditions: [condition("ChannelTrusted", "True", "MetadataVerified")], ...status },
    );

  it("a revert in force goes to the newest proven release neither recalled nor revoked", () => {
    const c = base({
      lastKnownGood: { ...R2, since: iso(NOW, -3600) },
      priorKnownGood: { ...R1, since: iso(NOW, -86_400) },
      revert: revertRecord(R3, R2),
      revokedReleases: [revokedEntry(R3)],
    });
    const d = run(c, [asksFor("m1", R3, R1)]);
    expect(d.status.revert?.to).toEqual(R1);
    expect(d.status.revert?.message).toContain(`retargeted from ${V2} to ${V1}`);
    expect(granted(d)).toEqual([`m1->${V1}`]);
    // The same revert, sent elsewhere: not a second revert (its own Event, no count).
    expect(d.revertStarted).toBeUndefined();
    expect(d.revertRetargeted).toMatchObject({ was: R2, revert: { from: R3, to: R1 } });
    expect(d.revertRetargeted?.why).toContain("bad disk driver");
  });

  it("a revert that starts skips the recalled last known good", () => {
    const c = base({
      lastKnownGood: { ...R2, since: iso(NOW, -3600) },
      priorKnownGood: { ...R1, since: iso(NOW, -86_400) },
    });
    c.spec.rollout = { revertRequest: { ...R3, by: "alice", at: iso(NOW, -10) } };
    const d = run(c, []);
    expect(d.revertStarted).toMatchObject({ from: R3, to: R1 });
  });

  it("with none left, the fleet holds and the condition names both releases", () => {
    const c = base({
      lastKnownGood: { ...R2, since: iso(NOW, -3600) },
      revert: revertRecord(R3, R2),
      revokedReleases: [revokedEntry(R3)],
    });
    const d = run(c, [asksFor("m1", R3, R2)]);
    expect(granted(d)).toEqual([]);
    const r = reverted(d);
    expect(r).toMatchObject({ status: "False", reason: "RevertHeld" });
    expect(r?.message).toContain(V3);
    expect(r?.message).toContain(V2);
    expect(r?.message).toContain("recalled");
    expect(d.status.revert).toEqual(revertRecord(R3, R2));
  });
});

describe("2.3 trust expired while the channel is unreachable (freeze attack)", () => {
  const frozen = (expiresAgo: number, accept = 0): Cluster => {
    const c = following(
      { target: R2, taken: R2, expiresAt: iso(NOW, -expiresAgo) },
      {
        conditions: [
          condition("ChannelReachable", "False", "ChannelUnreachable"),
          condition("ChannelTrusted", "False", "ChannelUnreachable"),
        ],
      },
    );
    c.spec.releases.trust!.acceptExpiredSeconds = accept;
    return c;
  };
  const fleet = [asksFor("m1", R1, R2)];

  it("before expiry the rollout goes on", () => {
    expect(granted(run(frozen(-60), fleet))).toEqual([`m1->${V2}`]);
  });
  it("within acceptExpiredSeconds it goes on", () => {
    expect(granted(run(frozen(60, 3600), fleet))).toEqual([`m1->${V2}`]);
  });
  it("past expiry + acceptExpiredSeconds: no new turn, and Progressing says why", () => {
    const d = run(frozen(7200, 3600), fleet);
    expect(granted(d)).toEqual([]);
    expect(progressing(d)).toMatchObject({ status: "False", reason: "NoTarget" });
    expect(progressing(d)?.message).toMatch(
      /trust expired at .* while the channel was unreachable/,
    );
  });
});

describe("2.4 follow never moves down when the release taken leaves the targets", () => {
  const H = 3600_000;
  const rel = (version: string, addedH: number): ChannelRelease => ({
    channel: "stable",
    version,
    digest: `sha256:${version.replace(/\D/g, "").padStart(64, "0")}`,
    length: 100,
    addedAt: new Date(NOW.getTime() - 100 * H + addedH * H),
    path: `stable/${version}/release.yaml`,
  });
  const [c1, c2, c3] = [rel(V1, 0), rel(V2, 24), rel(V3, 99)];
  const taken = { version: c2.version, digest: c2.digest };
  const follow = (releases: ChannelRelease[], delayH = 0) =>
    decideFollow({
      releases,
      current: taken,
      version: undefined,
      follow: { delaySeconds: delayH * 3600 },
      uid: "u",
      now: NOW,
    });

  it("V2 removed, only V1 left: no target (not V1), NotInChannel says why", () => {
    const d = follow([c1]);
    expect(d.target).toBeUndefined();
    expect(d.fault?.reason).toBe("NotInChannel");
    expect(d.fault?.message).toContain(`never moves the fleet below ${V2}`);
  });
  it("V2 removed, V3 not open yet: no target", () => {
    expect(follow([c1, c3], 10).target).toBeUndefined();
  });
  it("V2 removed, V3 open: V3", () => {
    expect(follow([c1, c3]).target?.version).toBe(V3);
  });
  it("the operator grants no turn for V1 then (the decision holds)", () => {
    const c = following(
      { taken: R2 },
      { conditions: [condition("ChannelTrusted", "False", "NotInChannel", "gone")] },
    );
    const d = run(c, [asksFor("m1", R2, R1)]);
    expect(granted(d)).toEqual([]);
    expect(progressing(d)?.message).toContain("does not go below");
  });
});

describe("2.5 an unrevoke after an automatic revert is not undone in the same pass", () => {
  // V2 was reverted automatically (2 failed trials, maxFailures 2); a person unrevokes it.
  const failedOn = (name: string, agoS: number): Machine =>
    machine(name, {
      status: { ...R1, step: "Ready", lastTrial: failedTrial({ at: iso(NOW, -agoS) }) },
    });
  const c = (extra: NonNullable<Cluster["spec"]["rollout"]>): Cluster =>
    withSpec(
      pinnedCluster({
        version: V2,
        status: {
          lastKnownGood: { ...R1, since: iso(NOW, -86_400) },
          revert: revertRecord(),
          revokedReleases: [revokedEntry()],
        },
      }),
      { rollout: { maxFailedTrials: 0, revert: { maxFailures: 2 }, ...extra } },
    );
  const unrevoke = { ...R2, by: "alice", at: iso(NOW, -60), reason: "the switch, not the release" };
  const fleet = [failedOn("m1", 600), failedOn("m2", 590), machine("m3")];

  it("the failures counted before the unrevoke do not revert it again", () => {
    const d = run(c({ unrevoke }), fleet);
    expect(d.revertStarted).toBeUndefined();
    expect(d.status.revert).toBeUndefined();
    expect(d.status.revokedReleases ?? []).toEqual([]);
  });
  it("also with resume --failed-release", () => {
    const resume = { ...R2, machines: ["m1", "m2"], by: "alice", at: iso(NOW, -30) };
    const d = run(c({ unrevoke, failedReleaseResume: resume }), fleet);
    expect(d.revertStarted).toBeUndefined();
    expect(d.status.revokedReleases ?? []).toEqual([]);
  });
  it("nor do the Prometheus check's failures counted before it", () => {
    const prometheus = { url: "http://prom:9090", query: "max(drops)", maxValue: 0.5 };
    const cl = c({ unrevoke, revert: { prometheus } });
    const checks = (ago: number[]) =>
      new Map([
        [
          D2,
          {
            failures: ago.length,
            last: "returned 0.9 > maxValue 0.5",
            failedAt: ago.map((a) => iso(NOW, -a)),
          },
        ],
      ]);
    const forgivenRun = decide(
      { ...observed(cl, [machine("m3")]), floors: NO_FLOORS, queryChecks: checks([300, 240, 180]) },
      SETTINGS,
    );
    expect(forgivenRun.revertStarted).toBeUndefined();
    const afresh = decide(
      { ...observed(cl, [machine("m3")]), floors: NO_FLOORS, queryChecks: checks([50, 40, 30]) },
      SETTINGS,
    );
    expect(afresh.revertStarted).toMatchObject({ reason: "RevertedOnPrometheusQuery" });
  });
  it("new failures after the unrevoke count again", () => {
    const d = run(c({ unrevoke }), [failedOn("m1", 30), failedOn("m2", 20), machine("m3")]);
    expect(d.revertStarted).toMatchObject({ from: R2, to: R1, trigger: "Automatic" });
  });
});
