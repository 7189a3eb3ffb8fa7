// Safety without a single leader: two copies of cluster-operator run at once without
// leader election, over a handful of randomized fleets (budgets, leaders), and in each run
// one copy is frozen with SIGSTOP while the other grants, then woken with SIGCONT. Every
// draw comes from the run's printed seed (test/support/seed.ts), so a failure replays. An
// independent observer (Fleet) checks every Cluster version and every instant a machine is
// down: never more than the budget, never two leaders.
import { writeFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ConflictError, type RebootTurn } from "../../src/api/index.js";
import { uniqueName, waitFor } from "../support/kube.js";
import { seeded, seedFromEnv } from "../support/seed.js";
import {
  V2,
  api,
  ensureNamespaces,
  fleetOnServer,
  playFleet,
  stagedStatus,
  startOperator,
  waitForLog,
  writeStatus,
  type MachinePlan,
  type OperatorProcess,
  undo,
  type Cleanups,
} from "./operator-fleet.js";

const cleanups: Cleanups = [];
const copies: OperatorProcess[] = [];

beforeAll(async () => {
  await ensureNamespaces();
  for (const id of ["copy-a", "copy-b"]) {
    const op = startOperator({
      identity: uniqueName(id),
      args: ["--start-grace", "1s", "--lost-after", "10s", "--no-leader-elect"],
    });
    copies.push(op);
    cleanups.push(() => op.stop());
  }
  await Promise.all(copies.map((op) => waitForLog(op, "cluster-operator started", 120_000)));
}, 180_000);
afterAll(async () => {
  await undo(cleanups);
  const dump = process.env.LIKEN_OPERATOR_LOG;
  if (dump) copies.forEach((op, i) => writeFileSync(`${dump}.${i}`, op.log()));
}, 300_000);

/**
 * Each run: the seed of its fleet (size, leaders, budget, which copy freezes, downtimes) and
 * how long one copy stays frozen (PAUSE_MS is 5 s). LIKEN_TEST_SEED replaces every run's seed,
 * to replay a failed run with the seed it printed.
 */
const RUNS = [
  { seed: 11, freezeMs: 1000 },
  { seed: 23, freezeMs: 6000 },
  { seed: 47, freezeMs: 6500 },
];

describe("two copies racing, one paused", () => {
  const grantors = new Set<string>();

  for (const run of RUNS) {
    const seed = seedFromEnv() ?? run.seed;
    it(`seed ${seed}, frozen ${run.freezeMs} ms: never more than the budget, never two leaders`, async () => {
      const r = seeded(`race frozen ${run.freezeMs} ms`, seed).random;
      const n = 5 + Math.floor(r() * 4);
      const leaders = Math.floor(r() * (n + 1)); // from none to every machine
      const budget = [1, 2, 3, "50%"][Math.floor(r() * 4)]!;
      const cluster = uniqueName(`race${seed}`);
      const plans: MachinePlan[] = Array.from({ length: n }, (_, i) => ({
        name: uniqueName(`r${seed}m${i}`),
        role: i < leaders ? "Leader" : "Worker",
      }));
      const { names, fleet } = await playFleet(cleanups, cluster, plans, {
        cluster: { maxUnavailable: budget },
        beatEveryMs: 1000,
        sim: { downMs: [150, 450], random: r },
      });

      for (const p of plans) await writeStatus(p.name, stagedStatus());
      // Freeze one copy once turns flow, while the other keeps granting; then wake it.
      await waitFor("the first turn", async () => fleet.grantsSeen.length > 0, {
        timeoutMs: 30_000,
      });
      const frozen = copies[Math.floor(r() * 2)]!;
      // Short freezes leave only the resourceVersion guard; long ones (past PAUSE_MS) also
      // make the woken copy start over with a grace.
      const freezeMs = run.freezeMs;
      const frozenAt = Date.now();
      process.kill(frozen.child.pid!, "SIGSTOP");
      try {
        await waitFor("more turns while one copy is frozen", async () => {
          const more = fleet.grantsSeen.length >= Math.min(n, 3) || fleet.finished.size === n;
          return more && Date.now() - frozenAt >= freezeMs;
        });
      } finally {
        process.kill(frozen.child.pid!, "SIGCONT");
      }
      await waitFor(`all ${n} machines on ${V2}`, async () => fleet.finished.size === n, {
        timeoutMs: 90_000,
      });
      await waitFor("phase Ready, no turn", async () => {
        const c = await api.clusters.get(cluster);
        return c.status?.phase === "Ready" && (c.status.rebootTurns ?? []).length === 0;
      });
      await fleet.stop();
      for (const g of fleet.grantors) grantors.add(g);

      expect(fleet.violations).toEqual([]);
      expect(fleet.maxSeen.leadersActing).toBeLessThanOrEqual(1);
      expect(fleet.grantsSeen.sort()).toEqual([...names].sort()); // one turn each, no repeats
    }, 300_000);
  }

  it("the woken copy noticed its pause", async () => {
    const woke = await waitFor("a wake-up in a copy's log", async () =>
      copies.some((op) => op.log().includes("this copy was paused")),
    );
    expect(woke).toBe(true);
    // Both copies were live writers, not one leader and one idle: both granted turns.
    expect(grantors.size).toBe(2);
  });
});

describe("the record is the guard", () => {
  it("a grant computed from a stale Cluster meets the record (409) and adds no turn", async () => {
    const cluster = uniqueName("stale");
    const plans: MachinePlan[] = [{ name: uniqueName("s1") }, { name: uniqueName("s2") }];
    const { names } = await fleetOnServer(cleanups, cluster, plans, {
      cluster: { maxUnavailable: 1 },
      beatEveryMs: 1000,
    });
    const stale = await api.clusters.get(cluster); // what a paused copy saw
    await writeStatus(names[0]!, stagedStatus());
    await waitFor("the live copies grant s1", async () =>
      (await api.clusters.get(cluster)).status?.rebootTurns?.some((t) => t.machine === names[0]),
    );
    // The paused copy wakes and sends the grant it decided before: s2, on the old view.
    const late: RebootTurn = {
      machine: names[1]!,
      grantedAt: new Date().toISOString().replace(/\.\d+Z$/, "Z"),
      grantedBy: "paused-copy",
      leader: false,
      version: V2,
    };
    const sent = api.clusters.replaceStatus({
      ...stale,
      status: { ...stale.status, rebootTurns: [...(stale.status?.rebootTurns ?? []), late] },
    });
    await expect(sent).rejects.toBeInstanceOf(ConflictError);
    const now = await api.clusters.get(cluster);
    expect(now.status?.rebootTurns?.map((t) => t.machine)).toEqual([names[0]]);
  }, 300_000);
});
