// Stuck drains: the agent's limits (drain-timeout.ts) and the operator's side (decide.ts): a
// turn given back on a drain timeout is released as DrainTimedOut, the machine goes to the
// back of the queue, and the Cluster lists it in status.drainSkipped.
import { describe, expect, it } from "vitest";
import type { Cluster, DrainTimedOut } from "../../src/api/index.js";
import { drainLimits, drainTimedOutRecord, isSkippedTurn } from "../../src/agent/drain-timeout.js";
import { decide } from "../../src/operator/decide/decide.js";
import {
  D2,
  NOW,
  SETTINGS,
  V2,
  asking,
  cluster,
  iso,
  observed,
  turn,
} from "./operator-fixtures.js";

const withDrain = (c: Cluster, d: NonNullable<Cluster["spec"]["disruption"]>): Cluster => ({
  ...c,
  spec: { ...c.spec, disruption: { ...c.spec.disruption, ...d } },
});

describe("the agent's drain limits", () => {
  it.each([
    ["nothing set: an hour, Stall", undefined, 7_200_000, 3_600_000, false],
    [
      "the Cluster's time when shorter than the config's",
      { drainTimeoutSeconds: 60 },
      3_600_000,
      60_000,
      false,
    ],
    ["the config can only shorten it", { drainTimeoutSeconds: 600 }, 30_000, 30_000, false],
    ["Skip", { drainTimeoutSeconds: 60, onDrainTimeout: "Skip" as const }, 3_600_000, 60_000, true],
    ["Stall", { onDrainTimeout: "Stall" as const }, 3_600_000, 3_600_000, false],
  ])("%s", (_name, disruption, configMs, wantMs, wantSkip) => {
    const c = disruption === undefined ? cluster() : withDrain(cluster(), disruption);
    expect(drainLimits(c, configMs)).toEqual({ timeoutMs: wantMs, skip: wantSkip });
  });

  it("the record names the pod and the PodDisruptionBudget that held the drain", () => {
    const blocker = {
      pod: "ns/web-0",
      podDisruptionBudget: "ns/web",
      since: iso(NOW, -60),
      message: "refused",
    };
    expect(
      drainTimedOutRecord(
        { version: V2, digest: D2 },
        iso(NOW, -90),
        blocker,
        "deadline",
        iso(NOW),
      ),
    ).toEqual({
      version: V2,
      digest: D2,
      turnGrantedAt: iso(NOW, -90),
      at: iso(NOW),
      pod: "ns/web-0",
      podDisruptionBudget: "ns/web",
      message: "deadline",
    });
  });

  it("a record naming the turn given back is not held again; a later turn is", () => {
    const r = { turnGrantedAt: iso(NOW, -90) } as DrainTimedOut;
    expect(isSkippedTurn(iso(NOW, -90), r)).toBe(true);
    expect(isSkippedTurn(iso(NOW, -5), r)).toBe(false);
    expect(isSkippedTurn(undefined, r)).toBe(false);
    expect(isSkippedTurn(iso(NOW, -90), undefined)).toBe(false);
  });
});

describe("the operator and a skipped drain", () => {
  const t = turn("m1", { grantedAt: iso(NOW, -90) });
  const skipped: DrainTimedOut = {
    version: V2,
    digest: D2,
    turnGrantedAt: t.grantedAt,
    at: iso(NOW, -2),
    pod: "ns/web-0",
    podDisruptionBudget: "ns/web",
    message: "the drain did not finish within 60 s",
  };
  const m1 = asking("m1", { status: { drainTimedOut: skipped } });

  it("releases the turn as DrainTimedOut, naming pod and PodDisruptionBudget", () => {
    const d = decide(observed(cluster({ turns: [t] }), [m1]), SETTINGS);
    expect(d.releases.map((r) => r.reason)).toEqual(["DrainTimedOut"]);
    expect(d.releases[0]?.message).toContain("held by pod ns/web-0 (PodDisruptionBudget ns/web)");
  });

  it("the machine goes to the back of the queue: a later asker goes first", () => {
    const m2 = asking("m2", { askedAfter: 100 }); // asked after m1, but before m1's drain timed out
    const d = decide(observed(cluster({ turns: [t] }), [m1, m2]), SETTINGS);
    expect(d.grants.map((g) => g.machine)).toEqual(["m2"]);
  });

  it("the Cluster lists the skipped machine, and the message says so", () => {
    const d = decide(
      observed(cluster({ turns: [t] }), [m1, asking("m2", { askedAfter: 100 })]),
      SETTINGS,
    );
    expect(d.status.drainSkipped).toEqual([
      { machine: "m1", at: skipped.at, pod: "ns/web-0", podDisruptionBudget: "ns/web" },
    ]);
    const p = d.status.conditions?.find((c) => c.type === "Progressing");
    expect(p?.message).toContain(
      "drain timed out and skipped, back of the queue: m1 (pod ns/web-0, PodDisruptionBudget ns/web)",
    );
  });

  it("a record of an earlier turn does not release a new one", () => {
    const later = turn("m1", { grantedAt: iso(NOW, -1) });
    const d = decide(
      observed(cluster({ turns: [later] }), [
        asking("m1", { status: { step: "Updating", drainTimedOut: skipped } }),
      ]),
      SETTINGS,
    );
    expect(d.releases).toEqual([]);
  });
});
