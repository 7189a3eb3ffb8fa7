// cluster-operator as a real process on the real control plane: a rollout within the
// budget, one leader at a time, the start-up grace, and what `kubectl get clusters` shows.
import { describe, expect, it } from "vitest";
import { kubectl, uniqueName, waitFor } from "../support/kube.js";
import { metricsUrlIn, scrape, total } from "../support/metrics.js";
import {
  V1,
  V2,
  api,
  clusterEvents,
  fileCleanups,
  playFleet,
  stagedStatus,
  startedOperator,
  writeStatus,
  type MachinePlan,
} from "./operator-fleet.js";

// After each test, not all: a test's operator copy must not stay and hold the leader Lease
// (and act on the next test's Cluster) while the next test runs its own.
const cleanups = fileCleanups("each");

describe("a rollout", () => {
  it("moves every machine within the budget, one leader at a time, after the start-up grace", async () => {
    const cluster = uniqueName("roll");
    const plans: MachinePlan[] = [
      { name: uniqueName("l1"), role: "Leader" },
      { name: uniqueName("l2"), role: "Leader" },
      { name: uniqueName("l3"), role: "Leader" },
      { name: uniqueName("w1") },
      { name: uniqueName("w2") },
      { name: uniqueName("w3") },
    ];
    const { fleet } = await playFleet(cleanups, cluster, plans, {
      cluster: { maxUnavailable: 3 },
      sim: { downMs: [300, 600] },
    });

    await startedOperator(cleanups, ["--start-grace", "3s", "--lost-after", "5s"]);
    // Everyone asks at once: the grace holds them back, then the budget and the leader rule.
    for (const p of plans) await writeStatus(p.name, stagedStatus());

    const grace = await waitFor("Progressing StartupGrace with the resume time", async () => {
      const c = await api.clusters.get(cluster);
      const p = c.status?.conditions?.find((x) => x.type === "Progressing");
      return p?.reason === "StartupGrace" ? p : undefined;
    });
    const resumes = /granting resumes at (\S+)$/.exec(grace.message)?.[1];
    expect(resumes).toBeDefined();
    expect(Date.parse(resumes!) - Date.parse(grace.lastTransitionTime)).toBe(3000);

    await waitFor("every machine on V2", async () => fleet.finished.size === plans.length, {
      timeoutMs: 60_000,
    });
    const done = await waitFor("phase Ready with no turn", async () => {
      const c = await api.clusters.get(cluster);
      return c.status?.phase === "Ready" && (c.status.rebootTurns ?? []).length === 0
        ? c
        : undefined;
    });
    await fleet.stop();

    expect(fleet.violations).toEqual([]);
    expect(fleet.maxSeen.turns).toBe(3); // the budget was used, not just respected
    expect(fleet.maxSeen.leadersActing).toBe(1);
    expect(done.status).toMatchObject({ machines: "6/6", version: V2, newest: V2, turns: "" });
    expect(done.status?.leaders).toEqual(
      plans
        .filter((p) => p.role === "Leader")
        .map((p) => p.name)
        .sort(),
    );

    // No turn before the grace ended: the Events say when each was granted.
    const events = await clusterEvents(cluster);
    const grants = events.filter((e) => e.reason === "TurnGranted");
    expect(grants).toHaveLength(6);
    for (const g of grants)
      expect(Date.parse(g.firstTimestamp)).toBeGreaterThanOrEqual(Date.parse(resumes!) - 1000);
    expect(events.filter((e) => e.reason === "TurnReleased")).toHaveLength(6);

    const wide = await kubectl(["get", "cluster", cluster, "-o", "wide"]);
    expect(wide.stdout).toMatch(
      /STATUS\s+MACHINES\s+VERSION\s+NEWEST\s+AVAILABLE\s+LEADERS\s+ENDPOINT\s+AGE\s+TURNS/,
    );
    expect(wide.stdout).toContain("Ready");
    expect(wide.stdout).toContain("6/6");
    expect(wide.stdout).toContain(V2);
    expect(V1).not.toBe(V2);
  });

  it("exposes metrics that move with it: grants, releases by reason, a failed trial, machines by step", async () => {
    const cluster = uniqueName("metrics");
    const plans: MachinePlan[] = [
      { name: uniqueName("w1") },
      { name: uniqueName("w2") },
      { name: uniqueName("w3") },
    ];
    const names = plans.map((p) => p.name);
    const failing = names[1]!;
    const { fleet } = await playFleet(cleanups, cluster, plans, {
      // One trial fails on purpose and every machine must still take its turn: the failure
      // brake (spec.rollout.maxFailedTrials) is off.
      cluster: { maxUnavailable: 1, rollout: { maxFailedTrials: 0 } },
      // Each machine stays down long enough for a 100 ms sampler to see its turn in flight.
      sim: { downMs: [1500, 2000], failTrial: new Set([failing]) },
    });

    const op = await startedOperator(cleanups, ["--start-grace", "2s", "--lost-after", "10s"]);
    const url = metricsUrlIn(op.log());
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/metrics$/);
    const of = { cluster };

    // The copy takes the Lease just after it starts; until then it acts on nothing.
    const before = await waitFor("this copy leads, per its metrics", async () => {
      const s = await scrape(url!);
      return total(s, "liken_operator_leading") === 1 ? s : undefined;
    });
    expect(total(before, "liken_operator_turns_granted_total", of)).toBe(0);

    for (const p of plans) await writeStatus(p.name, stagedStatus());
    await waitFor("3 machines UpdatePending in the metrics", async () => {
      const s = await scrape(url!);
      return total(s, "liken_operator_machines", { cluster, step: "UpdatePending" }) === 3;
    });

    let maxInFlight = 0;
    const sampler = setInterval(() => {
      scrape(url!).then(
        (s) =>
          (maxInFlight = Math.max(maxInFlight, total(s, "liken_operator_turns_in_flight", of))),
        () => undefined,
      );
    }, 100);
    cleanups.push(async () => clearInterval(sampler));
    await waitFor("every machine took its turn", async () => fleet.finished.size === 3, {
      timeoutMs: 60_000,
    });
    const after = await waitFor("no turn in flight and 3 releases counted", async () => {
      const s = await scrape(url!);
      const released = total(s, "liken_operator_turns_released_total", of);
      return total(s, "liken_operator_turns_in_flight", of) === 0 && released === 3 ? s : undefined;
    });
    clearInterval(sampler);
    await fleet.stop();
    expect(fleet.violations).toEqual([]);

    expect(maxInFlight).toBe(1);
    expect(total(after, "liken_operator_turns_granted_total", of)).toBe(3);
    expect(
      total(after, "liken_operator_turns_released_total", { cluster, reason: "Returned" }),
    ).toBe(2);
    expect(
      total(after, "liken_operator_turns_released_total", { cluster, reason: "RolledBack" }),
    ).toBe(1);
    expect(total(after, "liken_operator_failed_trials_total", { cluster, result: "Failed" })).toBe(
      1,
    );
    expect(total(after, "liken_operator_grant_latency_seconds_count", of)).toBe(3);
    // Each machine asked at once; the last waited for two turns of at least 1.5 s each.
    expect(total(after, "liken_operator_grant_latency_seconds_sum", of)).toBeGreaterThan(3);
    expect(total(after, "liken_operator_machines", { cluster, step: "Ready" })).toBe(2);
    expect(total(after, "liken_operator_machines", { cluster, step: "Failed" })).toBe(1);
    expect(total(after, "liken_operator_machines", { cluster, step: "UpdatePending" })).toBe(0);
    // The Cluster's channel (127.0.0.1:9) answers nothing: the read is counted as such.
    expect(
      total(after, "liken_operator_channel_reads_total", { cluster, result: "ChannelUnreachable" }),
    ).toBeGreaterThanOrEqual(1);
    expect(total(after, "liken_operator_rollout_stalled", of)).toBe(0);
    expect(total(after, "process_resident_memory_bytes")).toBeGreaterThan(0);
  });
});
