// The invariant checker (src/invariants), a row per rule: a history that breaks it is reported
// with that rule, and the same history with the rule kept is clean.
import { describe, expect, it } from "vitest";
import { checkHistory, type Observation, type Rel, type Rule } from "../../src/invariants/index.js";
import type { Machine } from "../../src/api/index.js";
import type { Cluster } from "../../src/api/index.js";
import { cluster, D1, D2, D3, GRANTED, machine, turn, V1, V2, V3 } from "./operator-fixtures.js";

const R2: Rel = { version: V2, digest: D2 };
const SETTINGS = { startGraceMs: 40_000 };

/** One machine's whole turn, every act in order, from t (ms) on; boot ids `${name}-1`, `-2`. */
function turnOf(name: string, t: number, opts: { leader?: boolean } = {}): Observation[] {
  const b1 = `${name}-1`;
  const b2 = `${name}-2`;
  return [
    { kind: "turn-read", at: t, machine: name, bootId: b1, release: R2 },
    { kind: "drain-start", at: t + 1, machine: name, bootId: b1, release: R2 },
    { kind: "slot-write", at: t + 2, machine: name, slot: "b", digest: D2 },
    { kind: "read-back", at: t + 3, machine: name, slot: "b", digest: D2, matched: true },
    { kind: "arm", at: t + 4, machine: name, bootId: b1, slot: "b", release: R2 },
    { kind: "reboot", at: t + 5, machine: name, bootId: b1, cause: "agent" },
    { kind: "boot", at: t + 6, machine: name, bootId: b2, slot: "b", trial: true },
    { kind: "rejoin", at: t + 7, machine: name, bootId: b2 },
    { kind: "promote", at: t + 8, machine: name, bootId: b2, release: R2 },
    {
      kind: "machine",
      at: t + 9,
      machine: onV2(name, opts.leader === true),
    },
  ];
}

function onV2(name: string, leader = false): Machine {
  return machine(name, {
    spec: { role: leader ? "Leader" : "Worker" },
    status: { version: V2, digest: D2 },
  });
}

/** The fleet's start: the Cluster (budget 1), machines on V1, booted once. */
function start(names: readonly string[], leaders: readonly string[] = []): Observation[] {
  return [
    { kind: "cluster", at: 0, cluster: cluster({ maxUnavailable: 1 }) },
    ...names.map((n): Observation => ({
      kind: "machine",
      at: 0,
      machine: machine(n, { spec: { role: leaders.includes(n) ? "Leader" : "Worker" } }),
    })),
    ...names.map((n): Observation => ({
      kind: "boot",
      at: 0,
      machine: n,
      bootId: `${n}-1`,
      slot: "a",
      trial: false,
    })),
  ];
}

const END: Observation = { kind: "end", at: 1_000_000 };

const clean: Observation[] = [
  ...start(["m1", "m2"]),
  ...turnOf("m1", 100),
  ...turnOf("m2", 200),
  END,
];

/** m1 alone and its whole turn at 100: the history the one-machine rows keep or change. */
const oneTurn: Observation[] = [...start(["m1"]), ...turnOf("m1", 100), END];

/** `oneTurn` with m1's act of `kind` moved to `at` (its turn again in time order). */
function movedTo(kind: Observation["kind"], at: number): Observation[] {
  return [
    ...start(["m1"]),
    ...turnOf("m1", 100)
      .map((o) => (o.kind === kind ? { ...o, at } : o))
      .sort((a, b) => a.at - b.at),
    END,
  ];
}

function without(h: Observation[], drop: (o: Observation) => boolean): Observation[] {
  return h.filter((o) => !drop(o));
}

const ROOT = `sha256:${"f".repeat(64)}`;
/** The Cluster holding m1's turn to V2, with `status` over it. */
const granting = (status: Cluster["status"] = {}, spec: Partial<Cluster["spec"]> = {}): Cluster => {
  const c = cluster({ maxUnavailable: 1, turns: [turn("m1")] });
  return { ...c, spec: { ...c.spec, ...spec }, status: { ...c.status, ...status } };
};
/** A follower of its channel that took `taken`. */
const follower = (taken: Rel, status: Cluster["status"] = {}): Cluster => {
  const c = granting({
    trust: {
      mode: "channel",
      rootDigest: ROOT,
      taken: { version: taken.version, digest: taken.digest! },
      target: { version: taken.version, digest: taken.digest! },
    },
    ...status,
  });
  delete c.spec.version;
  c.spec.releases = {
    ...c.spec.releases,
    trust: { mode: "channel", channel: "stable", rootDigest: ROOT, follow: {} },
  };
  return c;
};
const REVERT_V2 = {
  from: { version: V2, digest: D2 },
  to: { version: V1, digest: D1 },
  trigger: "Automatic" as const,
  message: "m",
  by: "op-a",
  at: "2026-12-02T10:00:00Z",
};

/** Issue 38's release rules (src/invariants/release.ts). */
const releaseRows: { rule: Rule; broken: Observation[]; kept: Observation[] }[] = [
  {
    rule: "grant-withdrawn",
    broken: [
      ...start(["m1"]),
      {
        kind: "cluster",
        at: 50,
        cluster: granting({
          revokedReleases: [{ version: V2, digest: D2, reason: "r", at: GRANTED }],
        }),
      },
      ...turnOf("m1", 100),
      END,
    ],
    kept: [
      ...start(["m1"]),
      { kind: "cluster", at: 50, cluster: granting() },
      ...turnOf("m1", 100),
      END,
    ],
  },
  {
    rule: "grant-withdrawn",
    // Recalled by the channel (status.trust.recalls).
    broken: [
      ...start(["m1"]),
      {
        kind: "cluster",
        at: 50,
        cluster: granting({ trust: { mode: "channel", recalls: [{ version: V2, digest: D2 }] } }),
      },
      ...turnOf("m1", 100),
      END,
    ],
    kept: [
      ...start(["m1"]),
      {
        kind: "cluster",
        at: 50,
        cluster: granting({ trust: { mode: "channel", recalls: [{ version: V3, digest: D3 }] } }),
      },
      ...turnOf("m1", 100),
      END,
    ],
  },
  {
    rule: "below-taken",
    broken: [
      ...start(["m1"]),
      { kind: "cluster", at: 50, cluster: follower({ version: V3, digest: D3 }) },
      ...turnOf("m1", 100),
      END,
    ],
    kept: [
      ...start(["m1"]),
      {
        kind: "cluster",
        at: 50,
        // A revert in force from V3 to V2: going down is the revert's say.
        cluster: follower(
          { version: V3, digest: D3 },
          {
            revert: {
              ...REVERT_V2,
              from: { version: V3, digest: D3 },
              to: { version: V2, digest: D2 },
            },
          },
        ),
      },
      ...turnOf("m1", 100),
      END,
    ],
  },
  {
    rule: "revert-dropped",
    broken: [
      ...start(["m1"]),
      {
        kind: "cluster",
        at: 10,
        cluster: cluster({ maxUnavailable: 1, status: { revert: REVERT_V2 } }),
      },
      { kind: "cluster", at: 50, cluster: granting() },
      ...turnOf("m1", 100),
      END,
    ],
    kept: [
      ...start(["m1"]),
      {
        kind: "cluster",
        at: 10,
        cluster: cluster({ maxUnavailable: 1, status: { revert: REVERT_V2 } }),
      },
      {
        kind: "cluster",
        at: 50,
        cluster: granting(
          {},
          {
            rollout: {
              unrevoke: { version: V2, digest: D2, by: "alice", at: "2026-12-02T10:01:00Z" },
            },
          },
        ),
      },
      ...turnOf("m1", 100),
      END,
    ],
  },
];

const rows: { rule: Rule; broken: Observation[]; kept: Observation[] }[] = [
  {
    rule: "budget",
    // m2 drains before m1 rejoined: two down, budget 1.
    broken: [...start(["m1", "m2"]), ...turnOf("m1", 100).slice(0, 6), ...turnOf("m2", 110), END],
    kept: clean,
  },
  {
    rule: "budget",
    // Lost counts: m2 marked Lost while m1 drains (kept: m2 back before m1's turn).
    broken: [
      ...start(["m1", "m2", "m3"]),
      { kind: "cluster", at: 1, cluster: cluster({ maxUnavailable: 1 }) },
      { kind: "machine", at: 50, machine: machine("m2", { status: { step: "Lost" } }) },
      ...turnOf("m1", 100),
      { kind: "machine", at: 300, machine: onV2("m2") },
      { kind: "machine", at: 300, machine: onV2("m3") },
      END,
    ],
    kept: [
      ...start(["m1", "m2", "m3"]),
      { kind: "machine", at: 50, machine: machine("m2", { status: { step: "Lost" } }) },
      { kind: "machine", at: 60, machine: machine("m2") },
      ...turnOf("m1", 100),
      { kind: "machine", at: 300, machine: onV2("m2") },
      { kind: "machine", at: 300, machine: onV2("m3") },
      END,
    ],
  },
  {
    rule: "two-leaders",
    broken: [
      ...start(["m1", "m2"], ["m1", "m2"]),
      { kind: "cluster", at: 1, cluster: cluster({ maxUnavailable: 2 }) },
      ...turnOf("m1", 100, { leader: true }).slice(0, 6),
      ...turnOf("m2", 110, { leader: true }),
      END,
    ],
    kept: [
      ...start(["m1", "m2"], ["m1", "m2"]),
      { kind: "cluster", at: 1, cluster: cluster({ maxUnavailable: 2 }) },
      ...turnOf("m1", 100, { leader: true }),
      ...turnOf("m2", 200, { leader: true }),
      END,
    ],
  },
  {
    rule: "reboot-without-turn",
    broken: without(clean, (o) => o.kind === "turn-read" && o.machine === "m1"),
    kept: clean,
  },
  {
    rule: "reboot-without-turn",
    // The arm came before the turn read.
    broken: movedTo("turn-read", 104.5),
    kept: oneTurn,
  },
  {
    rule: "boot-unverified-slot",
    broken: clean.map((o) =>
      o.kind === "read-back" && o.machine === "m2" ? { ...o, matched: false } : o,
    ),
    kept: clean,
  },
  {
    rule: "boot-unverified-slot",
    // Read back before the last write: it no longer speaks for the slot.
    broken: movedTo("read-back", 101.5),
    kept: oneTurn,
  },
  {
    rule: "failed-release-retried",
    broken: [
      ...start(["m1"]),
      { kind: "trial-failed", at: 50, machine: "m1", release: R2 },
      ...turnOf("m1", 100),
      END,
    ],
    kept: [
      ...start(["m1"]),
      { kind: "trial-failed", at: 50, machine: "m1", release: R2 },
      { kind: "say-so", at: 60, digest: D2, machines: [] },
      ...turnOf("m1", 100),
      END,
    ],
  },
  {
    rule: "grant-in-grace",
    broken: [
      ...start(["m1"]),
      { kind: "operator-start", at: 10, copy: "op-b" },
      { kind: "cluster", at: 39_000, cluster: cluster({ turns: [turn("m1")] }) },
      ...turnOf("m1", 39_100),
      END,
    ],
    kept: [
      ...start(["m1"]),
      { kind: "operator-start", at: 10, copy: "op-b" },
      { kind: "cluster", at: 40_010, cluster: cluster({ turns: [turn("m1")] }) },
      // The same record seen again after a wake-up is no new grant.
      { kind: "operator-start", at: 40_020, copy: "op-b" },
      {
        kind: "cluster",
        at: 40_030,
        cluster: cluster({ turns: [turn("m1", { grantedAt: GRANTED })] }),
      },
      ...turnOf("m1", 40_100),
      END,
    ],
  },
  {
    rule: "promote-without-rejoin",
    // The rejoin names the boot before the trial (a stale Node).
    broken: [
      ...start(["m1"]),
      ...turnOf("m1", 100).map((o) => (o.kind === "rejoin" ? { ...o, bootId: "m1-1" } : o)),
      END,
    ],
    kept: oneTurn,
  },
  {
    rule: "ended-unexplained",
    broken: [...start(["m1", "m2"]), ...turnOf("m1", 100), END],
    kept: [
      ...start(["m1", "m2"]),
      ...turnOf("m1", 100),
      {
        kind: "machine",
        at: 500,
        machine: machine("m2", {
          status: {
            step: "Failed",
            failedReleases: [{ ...R2, at: GRANTED, reason: "TrialFailed" }],
          },
        }),
      },
      END,
    ],
  },
  ...releaseRows,
  // lost-lapsed: Lost while its certificate lapsed and a join was possible for over 30 s.
  {
    rule: "lost-lapsed",
    broken: lapsedThen([{ kind: "join-possible", at: 2_000, machine: "m1", possible: true }]),
    kept: lapsedThen([
      { kind: "join-possible", at: 2_000, machine: "m1", possible: true },
      { kind: "identity", at: 3_000, machine: "m1", event: "rejoined" },
    ]),
  },
  {
    rule: "lost-lapsed",
    broken: lapsedThen([{ kind: "join-possible", at: 2_000, machine: "m1", possible: true }]),
    // No approver, or cut off, the whole time: it may read Lost.
    kept: lapsedThen([
      { kind: "join-possible", at: 2_000, machine: "m1", possible: true },
      { kind: "join-possible", at: 10_000, machine: "m1", possible: false },
    ]),
  },
];

/** m1's certificate lapses at 1 s; then `mid`; then m1 read Lost at 60 s. */
function lapsedThen(mid: Observation[]): Observation[] {
  return [
    ...start(["m1"]),
    { kind: "identity", at: 1_000, machine: "m1", event: "lapsed" },
    ...mid,
    { kind: "machine", at: 60_000, machine: machine("m1", { status: { step: "Lost" } }) },
    END,
  ];
}

describe("checkHistory", () => {
  it.each(rows.map((r, i) => [`${r.rule} #${i}`, r] as const))("%s", (_, row) => {
    const broken = checkHistory(row.broken, SETTINGS);
    expect(broken.map((v) => v.rule)).toContain(row.rule);
    expect(checkHistory(row.kept, SETTINGS)).toEqual([]);
  });

  it("a power cut is no act of liken's: not counted until the operator marks it Lost", () => {
    const h: Observation[] = [
      ...start(["m1", "m2"]),
      { kind: "reboot", at: 50, machine: "m2", bootId: "m2-1", cause: "power" },
      ...turnOf("m1", 100),
      { kind: "boot", at: 150, machine: "m2", bootId: "m2-2", slot: "a", trial: false },
      ...turnOf("m2", 200).map((o) =>
        "bootId" in o && o.bootId === "m2-1"
          ? { ...o, bootId: "m2-2" }
          : o.kind === "boot" || o.kind === "rejoin" || o.kind === "promote"
            ? { ...o, bootId: "m2-3" }
            : o,
      ),
      END,
    ];
    expect(checkHistory(h, SETTINGS)).toEqual([]);
  });

  describe("a machine holding its turn is down until it rejoined and the turn is gone", () => {
    // Budget 1; m1 holds a turn, does it and rejoins; m2 is marked Lost by a power cut.
    const held = cluster({ maxUnavailable: 1, turns: [turn("m1", { grantedAt: GRANTED })] });
    const lostM2: Observation = {
      kind: "machine",
      at: 110,
      machine: machine("m2", { status: { step: "Lost" } }),
    };
    const base: Observation[] = [
      ...start(["m1", "m2"]),
      { kind: "cluster", at: 50, cluster: held },
      ...turnOf("m1", 100).slice(0, 8),
      lostM2,
    ];

    it("a second reboot within the turn (a fallback) is the same disruption, not a new one", () => {
      const h: Observation[] = [
        ...base,
        { kind: "turn-read", at: 119, machine: "m1", bootId: "m1-2", release: R2 },
        { kind: "reboot", at: 120, machine: "m1", bootId: "m1-2", cause: "agent" },
      ];
      expect(checkHistory(h, SETTINGS)).toEqual([]);
    });

    it("another machine's drain counts the rejoined m1 while it holds the turn", () => {
      const m3 = [{ kind: "drain-start", at: 130, machine: "m3", bootId: "m3-1", release: R2 }];
      const start3: Observation = { kind: "machine", at: 0, machine: machine("m3") };
      const notLost: Observation = { ...lostM2, machine: machine("m2") };
      const h = [start3, ...base, notLost, ...(m3 as Observation[])];
      expect(checkHistory(h, SETTINGS).map((v) => v.message)).toEqual([
        "2 machines down (m3, m1), the budget allows 1",
      ]);
      const released: Observation = { kind: "cluster", at: 125, cluster: cluster({ turns: [] }) };
      const after = [start3, ...base, notLost, released, ...(m3 as Observation[])];
      expect(checkHistory(after, SETTINGS)).toEqual([]);
    });
  });

  it("a Machine deleted and created again mid-turn: the machine's disruption goes on", () => {
    const h: Observation[] = [
      ...start(["m1", "m2"]),
      ...turnOf("m1", 100).slice(0, 6),
      { kind: "machine-deleted", at: 107, name: "m1" },
      { kind: "machine", at: 108, machine: machine("m1") },
      { kind: "drain-start", at: 130, machine: "m2", bootId: "m2-1", release: R2 },
    ];
    expect(checkHistory(h, SETTINGS).map((v) => v.message)).toEqual([
      "2 machines down (m1, m2), the budget allows 1",
    ]);
  });

  it("names the machines and the budget", () => {
    const [v] = checkHistory(rows[0]!.broken, SETTINGS);
    expect(v?.message).toBe("2 machines down (m1, m2), the budget allows 1");
    expect(v?.at).toBe(111);
  });
});

// Lost as the operator counts it (seed 71702): from its mark to the first renewal after it when
// the history records renewals (the simulator), else while the step says Lost (a torture run,
// which does not watch Leases). m2 is marked Lost at 50; its step still reads Lost at 100
// because the writes that clear it failed; m1 drains at 100 on a budget of 1.
describe("Lost lasts from the mark to the first renewal after it", () => {
  const marked: Observation[] = [
    ...start(["m1", "m2"]),
    { kind: "cluster", at: 1, cluster: cluster({ maxUnavailable: 1 }) },
    { kind: "machine", at: 50, machine: machine("m2", { status: { step: "Lost" } }) },
  ];
  const renewed: Observation = { kind: "lease", at: 60, name: "m2" };
  const rows: { side: string; h: Observation[]; leases: boolean; down: boolean }[] = [
    {
      side: "renewed after the mark, step still Lost: back",
      h: [...marked, renewed],
      leases: true,
      down: false,
    },
    { side: "no renewal after the mark: Lost", h: marked, leases: true, down: true },
    {
      side: "a renewal before the mark does not end it",
      h: [...marked.slice(0, -1), { ...renewed, at: 40 }, marked.at(-1)!],
      leases: true,
      down: true,
    },
    {
      side: "renewals not recorded: the step says Lost",
      h: [...marked, renewed],
      leases: false,
      down: true,
    },
  ];
  it.each(rows)("$side", (row) => {
    const h = [...row.h, ...turnOf("m1", 100).slice(0, 2)];
    const rules = checkHistory(h, { ...SETTINGS, leases: row.leases }).map((v) => v.rule);
    expect(rules.includes("budget")).toBe(row.down);
  });
});
