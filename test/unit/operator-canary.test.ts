// The canary through decide(): the first turns of a release go to N workers (leaders only
// without workers), then granting pauses (CanaryPaused) until `liken rollout continue` or
// the canary's soak.
import { describe, expect, it } from "vitest";
import type { Cluster, ClusterStatus, Machine } from "../../src/api/index.js";
import { decide } from "../../src/operator/decide/decide.js";
import {
  D2,
  D3,
  NOW,
  SETTINGS,
  V2,
  V3,
  asking,
  cluster,
  iso,
  machine,
  observed,
  turn,
  failedTrial,
  back,
} from "./operator-fixtures.js";

const withCanary = (
  c: Cluster,
  canary: { machines: number; soakSeconds?: number },
  status?: ClusterStatus["canary"],
  extra: Partial<NonNullable<Cluster["spec"]["rollout"]>> = {},
): Cluster => ({
  ...c,
  spec: { ...c.spec, rollout: { canary, ...extra } },
  status: { ...c.status, ...(status === undefined ? {} : { canary: status }) },
});

const leader = (name: string): Machine => asking(name, { spec: { role: "Leader" } });
const reason = (c: Cluster, ms: Machine[]) =>
  decide(observed(c, ms), SETTINGS).status.conditions?.find((x) => x.type === "Progressing");

describe("canary: who goes first", () => {
  it("the first N turns go to workers, even when leaders asked earlier", () => {
    // maxFailedTrials 2: both canaries may try the unproven release at once (below: 1).
    const c = withCanary(cluster({ maxUnavailable: 5 }), { machines: 2 }, undefined, {
      maxFailedTrials: 2,
    });
    const ms = [
      leader("l1"),
      asking("w1", { askedAfter: 5 }),
      asking("w2", { askedAfter: 6 }),
      asking("w3", { askedAfter: 7 }),
    ];
    const d = decide(observed(c, ms), SETTINGS);
    expect(d.grants.map((g) => g.machine)).toEqual(["w1", "w2"]);
    expect(d.status.canary).toMatchObject({ version: V2, digest: D2, machines: ["w1", "w2"] });
  });

  it("with the default maxFailedTrials 1, the second canary waits for the first trial", () => {
    const c = withCanary(cluster({ maxUnavailable: 5 }), { machines: 2 });
    const ms = [asking("w1"), asking("w2", { askedAfter: 1 }), asking("w3", { askedAfter: 2 })];
    const d = decide(observed(c, ms), SETTINGS);
    expect(d.grants.map((g) => g.machine)).toEqual(["w1"]);
    expect(d.blocked?.kind).toBe("first-trial");
    // w1 came back on the release: proven, the second canary goes.
    const c2 = withCanary(cluster({ maxUnavailable: 5 }), { machines: 2 }, d.status.canary);
    const d2 = decide(observed(c2, [back("w1"), ms[1]!, ms[2]!]), SETTINGS);
    expect(d2.grants.map((g) => g.machine)).toEqual(["w2"]);
  });

  it("within the budget: one at a time with maxUnavailable 1, the next canary later", () => {
    const c = withCanary(cluster(), { machines: 2 });
    const d = decide(observed(c, [asking("w1"), asking("w2", { askedAfter: 1 })]), SETTINGS);
    expect(d.grants.map((g) => g.machine)).toEqual(["w1"]);
    const c2 = withCanary(cluster({ turns: [] }), { machines: 2 }, d.status.canary);
    const d2 = decide(observed(c2, [back("w1"), asking("w2", { askedAfter: 1 })]), SETTINGS);
    expect(d2.grants.map((g) => g.machine)).toEqual(["w2"]);
    expect(d2.status.canary?.machines).toEqual(["w1", "w2"]);
  });

  it("leaders are canaries only when there are no workers", () => {
    const c = withCanary(cluster({ maxUnavailable: 5 }), { machines: 1 });
    const d = decide(observed(c, [leader("l1"), leader("l2")]), SETTINGS);
    expect(d.grants.map((g) => g.machine)).toEqual(["l1"]);
  });

  it("fewer workers behind than N: those are the canary", () => {
    const c = withCanary(cluster({ maxUnavailable: 5 }), { machines: 3 });
    const d = decide(observed(c, [asking("w1"), back("w0"), leader("l1")]), SETTINGS);
    expect(d.grants.map((g) => g.machine)).toEqual(["w1"]);
  });

  it("while the canary is on its way, nobody else gets a turn", () => {
    const c = withCanary(
      cluster({ maxUnavailable: 5, turns: [turn("w1")] }),
      { machines: 1 },
      {
        version: V2,
        digest: D2,
        machines: ["w1"],
      },
    );
    const d = decide(
      observed(c, [asking("w1", { status: { step: "Updating" } }), asking("w2")]),
      SETTINGS,
    );
    expect(d.grants).toEqual([]);
    expect(d.status.conditions?.find((x) => x.type === "Progressing")?.message).toContain(
      "the canary (w1) is on its way",
    );
  });
});

describe("canary: the pause", () => {
  const rec = { version: V2, digest: D2, machines: ["w1"] };

  it("back and Ready: CanaryPaused naming the canary and `liken rollout continue`", () => {
    const c = withCanary(cluster({ maxUnavailable: 5 }), { machines: 1 }, rec);
    const d = decide(observed(c, [back("w1"), asking("w2")]), SETTINGS);
    expect(d.grants).toEqual([]);
    const p = d.status.conditions?.find((x) => x.type === "Progressing");
    expect(p?.reason).toBe("CanaryPaused");
    expect(p?.message).toContain("w1 run");
    expect(p?.message).toContain("liken rollout continue lab");
    expect(d.status.display).toBe("CanaryPaused");
    expect(d.status.canary?.readyAt).toBe(iso(NOW));
    expect(d.held?.reason).toBe("CanaryPaused");
  });

  it("continued for this release: passed, turns flow", () => {
    const c = withCanary(cluster({ maxUnavailable: 5 }), { machines: 1 }, rec, {
      canaryContinue: { version: V2, digest: D2, by: "ann", at: iso(NOW, -1) },
    });
    const d = decide(observed(c, [back("w1"), asking("w2"), asking("w3")]), SETTINGS);
    expect(d.grants.map((g) => g.machine)).toEqual(["w2", "w3"]);
    expect(d.status.canary?.passedAt).toBe(iso(NOW));
  });

  it("a continue for another release does not count", () => {
    const c = withCanary(cluster({ maxUnavailable: 5 }), { machines: 1 }, rec, {
      canaryContinue: { version: V3, digest: D3, by: "ann", at: iso(NOW, -1) },
    });
    expect(reason(c, [back("w1"), asking("w2")])?.reason).toBe("CanaryPaused");
  });

  it("with a soak: paused until the canary stayed Ready that long, then on by itself", () => {
    const early = withCanary(
      cluster(),
      { machines: 1, soakSeconds: 60 },
      { ...rec, readyAt: iso(NOW, -59) },
    );
    const p = reason(early, [back("w1"), asking("w2")]);
    expect(p?.reason).toBe("CanaryPaused");
    expect(p?.message).toContain(`by itself at ${iso(NOW, 1)}`);
    const late = withCanary(
      cluster(),
      { machines: 1, soakSeconds: 60 },
      { ...rec, readyAt: iso(NOW, -60) },
    );
    expect(
      decide(observed(late, [back("w1"), asking("w2")]), SETTINGS).grants.map((g) => g.machine),
    ).toEqual(["w2"]);
  });

  it("a canary that leaves Ready restarts the wait", () => {
    const c = withCanary(
      cluster(),
      { machines: 1, soakSeconds: 60 },
      { ...rec, readyAt: iso(NOW, -30) },
    );
    const d = decide(
      observed(c, [machine("w1", { status: { version: V2, step: "Downloading" } }), asking("w2")]),
      SETTINGS,
    );
    expect(d.status.canary?.readyAt).toBeUndefined();
    expect(d.grants).toEqual([]);
  });

  it("a new target starts a new canary", () => {
    const passed = { ...rec, passedAt: iso(NOW, -100) };
    const c = withCanary(cluster({ version: V3, maxUnavailable: 5 }), { machines: 1 }, passed);
    const v3 = (name: string, after: number): Machine =>
      asking(name, {
        askedAfter: after,
        status: {
          version: V2,
          staged: { version: V3, digest: D3, slot: "a", at: iso(NOW, -10) },
          turnRequest: { version: V3, digest: D3, at: iso(NOW, -10 + after) },
        },
      });
    const d = decide(observed(c, [v3("w1", 0), v3("w2", 1)]), SETTINGS);
    expect(d.grants.map((g) => g.machine)).toEqual(["w1"]);
    expect(d.status.canary).toMatchObject({ version: V3, machines: ["w1"] });
  });

  it("a failed canary: the failure brake speaks, not the canary", () => {
    const failedCanary = machine("w1", {
      status: {
        step: "Failed",
        lastTrial: failedTrial({ at: iso(NOW, -5) }),
      },
    });
    const c = withCanary(cluster(), { machines: 1 }, rec);
    expect(reason(c, [failedCanary, asking("w2")])?.reason).toBe("ReleaseFailed");
  });

  it("no canary configured: no canary status", () => {
    expect(decide(observed(cluster(), [asking("w1")]), SETTINGS).status.canary).toBeUndefined();
  });
});
