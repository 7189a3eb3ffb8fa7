// Every hold of the release decision names what a person can do, and that action works (issue
// 48, defect 6: NotVouched named `liken rollout revert` and the operator dropped the request).
// One row per action a hold names, for every rule of HOLD_RULES: the Cluster held by the rule
// (through the operator's decide(), where a person reads it: Progressing, Reverted), the
// action taken as it is written (the CLI's own request for `liken rollout revert|unrevoke`, the
// spec edit, the channel read that follows a publisher's fix), and the effect it promised.
import { describe, expect, it } from "vitest";
import type { Cluster, Machine, RevertRecord } from "../../src/api/types.js";
import type { Decision } from "../../src/operator/decide/decide.js";
import { HOLD_RULES, type FloorRead } from "../../src/release-decision/decide.js";
import { effectiveTarget, targetView } from "../../src/release-decision/view.js";
import { TODO, refused } from "../../src/operator/channel/trust-verdict.js";
import { revertRequestOf, unrevokeRequestOf } from "../../src/cli/commands/revert-request.js";
import { NOW, V1, V2, V3, cluster, iso, machine, progressing } from "./operator-fixtures.js";
import {
  NO_FLOORS,
  R1,
  R2,
  R3,
  ROOT,
  asksFor,
  condition,
  following,
  granted,
  reverted,
  run,
} from "./release-fixtures.js";

const V4 = "2026.10.16-001";
const R4 = { version: V4, digest: `sha256:${"4".repeat(64)}` };
const ALICE = { by: "alice", at: iso(NOW, -10) };

interface Scene {
  cluster: Cluster;
  machines: Machine[];
  floors?: ReadonlyMap<string, FloorRead>;
}

interface Row {
  rule: (typeof HOLD_RULES)[number];
  action: string;
  scene: () => Scene;
  /** Words of the action the hold's message names. */
  names: string[];
  /** The action, as it is written (and what the agents and the operator read after it). */
  act: (s: Scene) => Scene;
  /** What it promised. */
  effect: (d: Decision) => void;
}

/** The rule that holds `s` and the message a person reads for it, as the operator writes them. */
function holdOf(s: Scene): { rule: string; message: string; d: Decision } {
  const d = run(s.cluster, s.machines, s.floors ?? NO_FLOORS);
  const r = reverted(d);
  // The floor rules hold a revert being decided: said in the Reverted condition only.
  if (
    r?.status === "False" &&
    (r.reason === "RevertFloorUnread" || r.reason === "RevertBelowFloor")
  )
    return { rule: r.reason, message: r.message, d };
  const v = targetView(s.cluster, NOW);
  const message = progressing(d)?.message ?? "";
  if (v.kind === "revoked") return { rule: "Revoked", message, d };
  return { rule: v.kind === "held" ? v.hold.rule : v.kind, message, d };
}

const revoked = (r: { version: string; digest: string }, at = -300) => ({
  ...r,
  reason: "RevertedByRequest" as const,
  at: iso(NOW, at),
});
const revertRecord = (from = R2, to = R1): RevertRecord => ({
  from,
  to,
  trigger: "Request",
  reason: "RevertedByRequest",
  message: "alice asked",
  by: "alice",
  at: iso(NOW, -300),
});
const on = (name: string, r: { version: string; digest: string }): Machine =>
  machine(name, { status: { ...r, step: "Ready" } });
const withSpecOf = (c: Cluster, spec: Partial<Cluster["spec"]>): Cluster => ({
  ...c,
  spec: { ...c.spec, ...spec },
});
/** The Cluster as the operator's next read of a channel that verifies records it. */
const readAgain = (c: Cluster, trust: Partial<NonNullable<Cluster["status"]>["trust"]>) => ({
  ...c,
  status: {
    ...c.status,
    trust: { ...c.status!.trust!, ...trust },
    conditions: [
      condition("ChannelTrusted", "True", "MetadataVerified"),
      condition("ChannelReachable", "True", "ChannelRead"),
    ],
  },
});

/** `liken rollout revert lab` as the CLI writes it, on the Cluster and Machines it read. */
const personReverts = (s: Scene): Scene => {
  const ask = revertRequestOf(s.cluster, s.machines, ALICE);
  const rollout = { ...s.cluster.spec.rollout, revertRequest: ask.request };
  return { ...s, cluster: withSpecOf(s.cluster, { rollout }) };
};
const revertsTo = (d: Decision) => {
  expect(d.revertStarted).toMatchObject({ from: R2, to: R1, trigger: "Request" });
  expect(reverted(d)).toMatchObject({ status: "True", reason: "RevertedByRequest" });
  expect(granted(d)).toEqual([`m2->${V1}`]);
};

/** Held by the channel's refusal (SignatureThreshold), as the operator's read records it. */
function refusedScene(): Scene {
  const c = following({ target: R2, taken: R2 });
  const fault = { reason: "SignatureThreshold", role: "targets", message: "1 of 2" } as const;
  const v = refused(c, {}, { mode: "channel", rootDigest: ROOT }, fault, "http://ch/", NOW);
  c.status = { ...c.status, trust: v.trust!.status, conditions: [v.condition, v.trust!.condition] };
  return { cluster: c, machines: [asksFor("m1", R1, R2)] };
}

const recalledOrGone = (reason: "ReleaseRecalled" | "NotInChannel"): Scene => ({
  cluster: following(
    reason === "ReleaseRecalled"
      ? { taken: R2, recalled: { version: V2, reason: "panics" }, recalls: [{ ...R2 }] }
      : { taken: R2 },
    {
      lastKnownGood: { ...R1, since: iso(NOW, -86_400) },
      conditions: [condition("ChannelTrusted", "False", reason)],
    },
  ),
  machines: [on("m1", R1), asksFor("m2", R2, R1)],
});

/** Pinned on V2 (then V3), known good V2 over V1, a person asked to revert V2. */
const revertAsked = (version: string, lkg: { version: string; digest: string }): Cluster =>
  withSpecOf(
    cluster({
      version,
      status: {
        lastKnownGood: { ...lkg, since: iso(NOW, -86_400) },
        priorKnownGood: { ...R1, since: iso(NOW, -172_800) },
      },
    }),
    { rollout: { revertRequest: { ...lkg, ...ALICE } } },
  );

const rows: Row[] = [
  {
    rule: "TrustRefused",
    action: "the fix ChannelTrusted names (re-sign with the root's keys), then a verified read",
    scene: refusedScene,
    names: ["ChannelTrusted says what to do"],
    act: (s) => ({ ...s, cluster: readAgain(s.cluster, { target: R2 }) }),
    effect: (d) => expect(granted(d)).toEqual([`m1->${V2}`]),
  },
  {
    rule: "TrustExpired",
    action: "the channel reachable and refreshed (liken release channel refresh)",
    scene: () => ({
      cluster: following(
        { target: R2, taken: R2, expiresAt: iso(NOW, -3600) },
        { conditions: [condition("ChannelReachable", "False", "ChannelUnreachable")] },
      ),
      machines: [asksFor("m1", R1, R2)],
    }),
    names: ["Make the channel reachable", "`liken release channel refresh`"],
    act: (s) => ({ ...s, cluster: readAgain(s.cluster, { expiresAt: iso(NOW, 86_400) }) }),
    effect: (d) => expect(granted(d)).toEqual([`m1->${V2}`]),
  },
  {
    rule: "RevertTargetWithdrawn",
    action: "spec.version set to a release the person trusts",
    scene: () => ({
      cluster: cluster({
        version: V2,
        status: {
          revert: revertRecord(),
          revokedReleases: [revoked(R1, -900), revoked(R2)],
          lastKnownGood: { ...R1, since: iso(NOW, -86_400) },
        },
      }),
      machines: [asksFor("m1", R2, R1)],
    }),
    names: ["Set spec.version to a release you trust"],
    act: (s) => ({
      cluster: withSpecOf(s.cluster, { version: V3 }),
      machines: [asksFor("m1", R2, R3)],
    }),
    effect: (d) => {
      expect(granted(d)).toEqual([`m1->${V3}`]);
      expect(reverted(d)).toMatchObject({ status: "False", reason: "RevertSuperseded" });
    },
  },
  {
    rule: "RevertFloorUnread",
    action: "spec.releases.source answers: the floor is read",
    scene: () => ({
      cluster: revertAsked(V2, R2),
      machines: [on("m1", R2)],
      floors: new Map([[R2.digest, { kind: "unread", message: "HTTP 503" }]]),
    }),
    names: ["Check spec.releases.source"],
    act: (s) => ({ ...s, floors: NO_FLOORS }),
    effect: (d) => expect(d.revertStarted).toMatchObject({ from: R2, to: R1 }),
  },
  {
    rule: "RevertBelowFloor",
    action: "spec.version rolled forward to a fixed release at or above the floor",
    scene: () => {
      const c = revertAsked(V3, R3);
      c.spec.releases.catalog = [...(c.spec.releases.catalog ?? []), R4];
      return {
        cluster: c,
        machines: [on("m1", R3)],
        floors: new Map([[R3.digest, { kind: "read", floor: V2 }]]),
      };
    },
    names: [`Roll forward to a fixed release at or above ${V2}`],
    act: (s) => ({
      ...s,
      cluster: withSpecOf(s.cluster, { version: V4 }),
      machines: [asksFor("m1", R3, R4)],
    }),
    effect: (d) => {
      expect(d.revertStarted).toBeUndefined();
      expect(granted(d)).toEqual([`m1->${V4}`]);
    },
  },
  {
    rule: "Revoked",
    action: "liken rollout unrevoke lab V2",
    scene: () => ({
      cluster: cluster({ version: V2, status: { revokedReleases: [revoked(R2)] } }),
      machines: [asksFor("m1", R1, R2)],
    }),
    names: [`\`liken rollout unrevoke lab ${V2}\``],
    act: (s) => {
      const unrevoke = unrevokeRequestOf(s.cluster, V2, ALICE);
      return { ...s, cluster: withSpecOf(s.cluster, { rollout: { unrevoke } }) };
    },
    effect: (d) => {
      expect(granted(d)).toEqual([`m1->${V2}`]);
      expect(d.status.revokedReleases ?? []).toEqual([]);
    },
  },
  {
    rule: "Recalled",
    action: "liken rollout revert lab",
    scene: () => recalledOrGone("ReleaseRecalled"),
    names: ["`liken rollout revert CLUSTER`"],
    act: personReverts,
    effect: revertsTo,
  },
  {
    rule: "NotVouched",
    action: "liken rollout revert lab",
    scene: () => recalledOrGone("NotInChannel"),
    names: ["`liken rollout revert CLUSTER`"],
    act: personReverts,
    effect: revertsTo,
  },
  {
    rule: "BelowTaken",
    action: "spec.version pinned to the older release, follow removed",
    scene: () => ({ cluster: following({ target: R1, taken: R2 }), machines: [on("m1", R2)] }),
    names: [`set spec.version to ${V1}`, "remove spec.releases.trust.follow"],
    act: (s) => {
      const trust = { ...s.cluster.spec.releases.trust!, follow: undefined };
      const c = withSpecOf(s.cluster, {
        version: V1,
        releases: { ...s.cluster.spec.releases, trust },
      });
      // The operator's read for spec.version V1 vouches for it (follow.ts pinnedVersion).
      return { cluster: readAgain(c, { target: R1 }), machines: [asksFor("m1", R2, R1)] };
    },
    effect: (d) => expect(granted(d)).toEqual([`m1->${V1}`]),
  },
  {
    rule: "BelowTaken",
    action: "a release newer than the one taken published (liken release channel add)",
    scene: () => ({ cluster: following({ target: R1, taken: R2 }), machines: [on("m1", R2)] }),
    names: [`publish a release newer than ${V2}`, "`liken release channel add`"],
    act: (s) => ({
      cluster: readAgain(s.cluster, { target: R3, taken: R3 }),
      machines: [asksFor("m1", R2, R3)],
    }),
    effect: (d) => expect(granted(d)).toEqual([`m1->${V3}`]),
  },
  {
    rule: "EvidenceShort",
    action: "liken promote signs it again with more evidence",
    scene: () => {
      const summary = {
        from: "canary",
        clusters: 1,
        machines: 3,
        failedTrials: 0,
        soakSeconds: 7200,
        promotedAt: iso(NOW, -3600),
      };
      const c = following({ target: R2, taken: R2, evidence: summary });
      c.spec.releases.trust!.follow = { requireEvidence: { clusters: 2 } };
      return { cluster: c, machines: [asksFor("m1", R1, R2)] };
    },
    names: ["`liken promote` signs it again"],
    act: (s) => {
      const evidence = { ...s.cluster.status!.trust!.evidence!, clusters: 2 };
      return { ...s, cluster: readAgain(s.cluster, { evidence }) };
    },
    effect: (d) => expect(granted(d)).toEqual([`m1->${V2}`]),
  },
];

describe("every hold's named action works", () => {
  it("has a row for every rule of decideRelease", () => {
    expect([...new Set(rows.map((r) => r.rule))].sort()).toEqual([...HOLD_RULES].sort());
  });

  it.each(rows.map((r) => [r.rule, r.action, r] as const))("%s: %s", (rule, _action, row) => {
    const held = holdOf(row.scene());
    expect(held.rule).toBe(rule);
    expect(held.d.grants).toEqual([]);
    for (const w of row.names) expect(held.message).toContain(w);
    row.effect(run(...args(row.act(row.scene()))));
  });

  // A hold that does not name the revert: the CLI refuses it and says what does (it would be
  // dropped otherwise), and a request written anyway (GitOps) is said on the Cluster. A revert
  // is decided without the clock (an expired trust holds it once it is recorded), so the holds
  // are those of the clockless view.
  const unnamed = rows.filter((r) => {
    const v = targetView(r.scene().cluster);
    const h = holdOf(r.scene());
    return v.kind === "held" && v.revert === undefined && !h.message.includes("rollout revert");
  });
  it.each(unnamed.map((r) => [r.rule, r] as const))(
    "%s: `liken rollout revert` is refused with what to do, and said when written anyway",
    (_rule, row) => {
      const s = row.scene();
      expect(() => revertRequestOf(s.cluster, s.machines, ALICE)).toThrow(
        expect.objectContaining({ code: "LIKEN_OPERATOR_REVERT_NOT_APPLICABLE" }),
      );
      const from = targetView(s.cluster);
      if (from.kind !== "held") throw new Error("not held");
      const rollout = { revertRequest: { ...from.from, ...ALICE } };
      const d = run(withSpecOf(s.cluster, { rollout }), s.machines, s.floors ?? NO_FLOORS);
      expect(d.revertStarted).toBeUndefined();
      expect(reverted(d)).toMatchObject({ status: "False", reason: "RevertHeld" });
      expect(reverted(d)?.message).toContain("a revert does not lift that hold");
    },
  );

  it("TrustRefused defers to ChannelTrusted, and ChannelTrusted names the fix", () => {
    const c = refusedScene().cluster;
    const trusted = c.status?.conditions?.find((x) => x.type === "ChannelTrusted");
    expect(trusted?.message).toContain(TODO.SignatureThreshold);
  });

  it("a revoked release: `liken rollout revert` is refused and names the unrevoke", () => {
    const s = rows.find((r) => r.rule === "Revoked")!.scene();
    expect(effectiveTarget(s.cluster)).toBeUndefined();
    expect(() => revertRequestOf(s.cluster, s.machines, ALICE)).toThrow(
      expect.objectContaining({
        code: "LIKEN_OPERATOR_REVERT_NOT_APPLICABLE",
        message: expect.stringContaining(`liken rollout unrevoke lab ${V2}`),
      }),
    );
  });
});

const args = (s: Scene): Parameters<typeof run> => [s.cluster, s.machines, s.floors ?? NO_FLOORS];
