// What the operator reads from one Machine, table by table: Lost, the turn ask, the target,
// and the step a machine shows again when its heartbeat returns.
import { describe, expect, it } from "vitest";
import type { Machine, MachineStatus } from "../../src/api/index.js";
import {
  isLeader,
  isLost,
  lastSeenAlive,
  stepAfterLost,
  targetOf,
  turnAsk,
  type HeartbeatView,
} from "../../src/operator/view/machine-view.js";
import { D1, D2, D3, T0, V1, V2, V3, asking, cluster, iso, machine } from "./operator-fixtures.js";

const LOST_AFTER = 40;
/** A reading of the operator's monotonic clock, `secondsBeforeNow` before MONO_NOW. */
const MONO_NOW = 7_200_000;
const at = (secondsBeforeNow: number): number => MONO_NOW - secondsBeforeNow * 1000;

describe("isLost", () => {
  it.each([
    { name: "renewed 39 s ago", renewed: 39, step: "Ready", since: 600, want: false },
    { name: "renewed exactly 40 s ago", renewed: 40, step: "Ready", since: 600, want: true },
    { name: "renewed 41 s ago", renewed: 41, step: "Ready", since: 600, want: true },
    { name: "a renewal seen beats a Lost mark", renewed: 1, step: "Lost", since: 600, want: false },
    {
      name: "unseen, marked Lost by another copy",
      renewed: undefined,
      step: "Lost",
      since: 1,
      want: true,
    },
    {
      name: "unseen, 39 s after this copy started",
      renewed: undefined,
      step: "Ready",
      since: 39,
      want: false,
    },
    {
      name: "unseen, 40 s after this copy started",
      renewed: undefined,
      step: "Ready",
      since: 40,
      want: true,
    },
  ] as const)("$name: $want", ({ renewed, step, since, want }) => {
    const m = machine("m", { status: { step } });
    const hb: HeartbeatView = {
      renewedAt: new Map(renewed === undefined ? [] : [["m", at(renewed)]]),
      since: at(since),
    };
    expect(isLost(m, hb, MONO_NOW, LOST_AFTER)).toBe(want);
  });

  it("a machine with no status yet is judged from this copy's start", () => {
    const m: Machine = { ...machine("m"), status: undefined };
    const hb: HeartbeatView = { renewedAt: new Map(), since: at(39) };
    expect(isLost(m, hb, MONO_NOW, LOST_AFTER)).toBe(false);
  });

  it("judges each machine by its own renewal", () => {
    const hb: HeartbeatView = { renewedAt: new Map([["other", at(1)]]), since: at(600) };
    expect(isLost(machine("m"), hb, MONO_NOW, LOST_AFTER)).toBe(true);
  });
});

describe("lastSeenAlive", () => {
  it("is the renewal this copy saw, or its own start", () => {
    const hb: HeartbeatView = { renewedAt: new Map([["m", at(3)]]), since: at(600) };
    expect(lastSeenAlive(machine("m"), hb)).toEqual(at(3));
    expect(lastSeenAlive(machine("n"), hb)).toEqual(at(600));
  });
});

describe("targetOf", () => {
  it.each([
    { version: V2, want: { version: V2, digest: D2 } },
    { version: V3, want: { version: V3, digest: D3 } },
    { version: "2027.01.01-001", want: undefined },
    { version: null, want: undefined },
  ])("spec.version $version -> $want", ({ version, want }) => {
    expect(targetOf(cluster({ version }))).toEqual(want);
  });

  it("no catalog, no target", () => {
    const c = cluster();
    const bare = { ...c, spec: { ...c.spec, releases: { source: c.spec.releases.source } } };
    expect(targetOf(bare)).toBeUndefined();
  });
});

describe("turnAsk", () => {
  const target = { version: V2, digest: D2 };
  const staged = (over: Partial<MachineStatus["staged"]> = {}) => ({
    version: V2,
    digest: D2,
    slot: "b" as const,
    at: iso(T0),
    ...over,
  });
  const cases: { name: string; m: Machine; target?: typeof target | undefined; want: string }[] = [
    { name: "staged the target and asks (Auto)", m: asking("m"), want: "eligible" },
    {
      name: "RebootPending counts as asking",
      m: asking("m", { status: { step: "RebootPending" } }),
      want: "eligible",
    },
    { name: "no target", m: asking("m"), target: undefined, want: "none" },
    { name: "no status", m: { ...asking("m"), status: undefined }, want: "none" },
    { name: "nothing staged", m: asking("m", { status: { staged: undefined } }), want: "none" },
    {
      name: "staged another digest",
      m: asking("m", { status: { staged: staged({ digest: D3 }) } }),
      want: "none",
    },
    {
      name: "staged another version",
      m: asking("m", { status: { staged: staged({ version: V3 }) } }),
      want: "none",
    },
    {
      name: "already runs the target",
      m: asking("m", { status: { version: V2 } }),
      want: "none",
    },
    { name: "step Ready", m: asking("m", { status: { step: "Ready" } }), want: "none" },
    { name: "step Updating", m: asking("m", { status: { step: "Updating" } }), want: "none" },
    {
      name: "no request",
      m: asking("m", { status: { turnRequest: undefined } }),
      want: "none",
    },
    {
      name: "a request for another version",
      m: asking("m", { status: { turnRequest: { version: V3, digest: D2, at: iso(T0) } } }),
      want: "none",
    },
    {
      name: "a request for another digest",
      m: asking("m", { status: { turnRequest: { version: V2, digest: D1, at: iso(T0) } } }),
      want: "none",
    },
    {
      name: "Manual, not approved",
      m: asking("m", { spec: { rebootPolicy: "Manual" } }),
      want: "awaiting-approval",
    },
    {
      name: "Manual, not approved, without a request yet",
      m: asking("m", { spec: { rebootPolicy: "Manual" }, status: { turnRequest: undefined } }),
      want: "awaiting-approval",
    },
    {
      name: "no policy means Manual",
      m: asking("m", { spec: { rebootPolicy: undefined } }),
      want: "awaiting-approval",
    },
    {
      name: "Manual, approved for this version",
      m: asking("m", {
        spec: { rebootPolicy: "Manual", approval: { version: V2, by: "x", at: iso(T0) } },
      }),
      want: "eligible",
    },
    {
      name: "Manual, approved for another version",
      m: asking("m", {
        spec: { rebootPolicy: "Manual", approval: { version: V1, by: "x", at: iso(T0) } },
      }),
      want: "awaiting-approval",
    },
  ];
  it.each(cases)("$name: $want", ({ m, want, ...c }) => {
    const ask = turnAsk(m, "target" in c ? c.target : target);
    expect(ask.kind).toBe(want);
    if (ask.kind === "eligible") expect(ask.at).toBe(m.status?.turnRequest?.at);
  });
});

describe("isLeader", () => {
  it.each([
    { role: "Leader" as const, want: true },
    { role: "Worker" as const, want: false },
  ])("$role: $want", ({ role, want }) => {
    expect(isLeader(machine("m", { spec: { role } }))).toBe(want);
  });
});

describe("stepAfterLost: the step a machine shows again when its heartbeat returns", () => {
  const failed = [{ version: V2, digest: D2, at: iso(T0), reason: "TrialFellBack" as const }];
  const cases: { name: string; m: Machine; want: string }[] = [
    {
      name: "mid-update",
      m: machine("m", { status: { step: "Lost", updateStage: "Rebooting" } }),
      want: "Updating",
    },
    {
      name: "staged and asking (Auto)",
      m: asking("m", { status: { step: "Lost" } }),
      want: "UpdatePending",
    },
    {
      name: "staged and asking, Manual without approval",
      m: asking("m", { spec: { rebootPolicy: "Manual" }, status: { step: "Lost" } }),
      want: "RebootPending",
    },
    {
      name: "staged and asking, no policy (Manual)",
      m: asking("m", { spec: { rebootPolicy: undefined }, status: { step: "Lost" } }),
      want: "RebootPending",
    },
    {
      name: "staged and asking, Manual approved",
      m: asking("m", {
        spec: { rebootPolicy: "Manual", approval: { version: V2, by: "x", at: iso(T0) } },
        status: { step: "Lost" },
      }),
      want: "UpdatePending",
    },
    {
      name: "staged without a request, download done",
      m: asking("m", {
        status: {
          step: "Lost",
          turnRequest: undefined,
          progress: { percent: 100, bytesDone: 1, bytesTotal: 1 },
        },
      }),
      want: "Ready",
    },
    {
      name: "downloading",
      m: machine("m", {
        status: { step: "Lost", progress: { percent: 40, bytesDone: 4, bytesTotal: 10 } },
      }),
      want: "Downloading",
    },
    {
      name: "the target failed here, still on the old release",
      m: machine("m", {
        status: { step: "Lost", target: { version: V2, digest: D2 }, failedReleases: failed },
      }),
      want: "Failed",
    },
    {
      name: "a failed release that is not the target",
      m: machine("m", {
        status: { step: "Lost", target: { version: V3, digest: D3 }, failedReleases: failed },
      }),
      want: "Ready",
    },
    {
      name: "the target failed once but it runs it now",
      m: machine("m", {
        status: {
          step: "Lost",
          version: V2,
          target: { version: V2, digest: D2 },
          failedReleases: failed,
        },
      }),
      want: "Ready",
    },
    {
      name: "a request without a staged release",
      m: asking("m", { status: { step: "Lost", staged: undefined } }),
      want: "Ready",
    },
    {
      name: "a target and no failed releases",
      m: machine("m", { status: { step: "Lost", target: { version: V2, digest: D2 } } }),
      want: "Ready",
    },
    {
      name: "the target among other failed releases",
      m: machine("m", {
        status: {
          step: "Lost",
          target: { version: V2, digest: D2 },
          failedReleases: [{ ...failed[0]!, version: V3, digest: D3 }, ...failed],
        },
      }),
      want: "Failed",
    },
    { name: "nothing going on", m: machine("m", { status: { step: "Lost" } }), want: "Ready" },
    { name: "no status at all", m: { ...machine("m"), status: undefined }, want: "Ready" },
  ];
  it.each(cases)("$name: $want", ({ m, want }) => {
    expect(stepAfterLost(m)).toBe(want);
  });
});
