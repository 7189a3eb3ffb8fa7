// The page's section 3 on the real control plane: three simulated machines (the real agent,
// file-backed slots, the firmware model, reboots played by the supervisor) walk a rollout,
// a bad release that fails its trial on one machine, and a retarget mid-download with a
// reboot in between. Every check reads the API objects an independent watcher recorded (or
// the supervisor's boot record, which is what the firmware did), never the agent's logs.
import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Machine, ReleaseRef } from "../../src/api/types.js";
import { HeartbeatClient } from "../../src/api/heartbeat.js";
import { kubeConfig, waitFor } from "../support/kube.js";
import { metricsUrlIn, scrape, total } from "../support/metrics.js";
import { Fleet, checkTurnInvariants } from "./agent-harness.js";
import { approveReboot } from "./fleet-steps.js";

const VERSIONS = [
  "2026.10.10-001",
  "2026.10.12-001",
  "2026.10.13-001",
  "2026.10.14-001",
  "2026.10.15-001",
];
const suffix = Date.now().toString(36);
const L1 = `l1-${suffix}`;
const L2 = `l2-${suffix}`;
const W1 = `w1-${suffix}`;
const LEADERS = new Set([L1, L2]);

function runs(r: ReleaseRef) {
  return (m: Machine): boolean => m.status?.step === "Ready" && m.status.version === r.version;
}

describe("agent rollout on the real control plane", () => {
  const fleet = new Fleet();
  let v1: ReleaseRef, v2: ReleaseRef, v3: ReleaseRef, v4: ReleaseRef, v5: ReleaseRef;

  const approve = (machine: string, r: ReleaseRef): Promise<void> =>
    approveReboot(fleet, machine, r, "agent-test");

  beforeAll(async () => {
    // L1 fails a release the others then install: this test is about the agent, so the
    // operator's failure brake (spec.rollout.maxFailedTrials) is off.
    await fleet.start(VERSIONS, { rollout: { maxFailedTrials: 0 } });
    [v1, v2, v3, v4, v5] = fleet.releases as [
      ReleaseRef,
      ReleaseRef,
      ReleaseRef,
      ReleaseRef,
      ReleaseRef,
    ];
    await fleet.addMachine({ name: L1, role: "Leader", rebootPolicy: "Auto" });
    await fleet.addMachine({ name: L2, role: "Leader", rebootPolicy: "Auto" });
    await fleet.addMachine({ name: W1, role: "Worker", rebootPolicy: "Manual" });
    await fleet.startRealOperator();
    fleet.powerOnAll();
    await fleet.waitAll("every machine reports Ready on the first release", runs(v1), 240_000);
  }, 400_000);
  afterAll(() => fleet.stop(), 60_000);

  it("Auto machines take turns one leader at a time; a Manual one waits in RebootPending for approval", async () => {
    await fleet.setTarget(v2);
    await waitFor(
      "the Auto leaders run the new release and the Manual worker waits for approval",
      async () => {
        const ms = await Promise.all([L1, L2, W1].map((n) => fleet.api.machines.get(n)));
        return runs(v2)(ms[0]!) && runs(v2)(ms[1]!) && ms[2]!.status?.step === "RebootPending";
      },
      { timeoutMs: 400_000, intervalMs: 500 },
    );
    // Without an approval the Manual machine never asked for a turn and never got one.
    const w1 = await fleet.api.machines.get(W1);
    expect(w1.status?.turnRequest).toBeUndefined();
    expect(w1.status?.staged?.version).toBe(v2.version);
    expect(fleet.history.some((h) => h.kind === "Cluster" && h.turns?.includes(W1))).toBe(false);
    expect(fleet.machines.get(W1)!.boots).toHaveLength(1);

    await approve(W1, v2);
    await fleet.waitAll("every machine runs the new release", runs(v2), 300_000);
    expect(checkTurnInvariants(fleet.history, LEADERS)).toEqual([]);
    for (const name of [L1, L2, W1]) {
      const steps = fleet.machineHistory(name).map((h) => h.step);
      const seq = steps.filter((s, i) => s !== steps[i - 1]);
      expect(seq).toEqual(
        expect.arrayContaining(["Downloading", "UpdatePending", "Updating", "Ready"]),
      );
      // One trial boot of slot b, then b is the default.
      expect(
        fleet.machines
          .get(name)!
          .boots.filter((b) => b.trial)
          .map((b) => b.slot),
      ).toEqual(["b"]);
      const s = (await fleet.api.machines.get(name)).status!;
      expect(s.bootedSlot).toBe("b");
      expect(s.lastTrial).toMatchObject({ version: v2.version, result: "Succeeded", slot: "b" });
      expect(s.turnRequest).toBeUndefined();
    }
    expect(fleet.machineHistory(W1).map((h) => h.step)).toContain("RebootPending");

    // The agent that proved the trial (the one started after the reboot) says so in its metrics.
    const url = metricsUrlIn(readFileSync(fleet.machines.get(L2)!.logFile, "utf8"));
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/metrics$/);
    const m = await scrape(url!);
    expect(total(m, "liken_agent_last_trial", { result: "Succeeded", version: v2.version })).toBe(
      1,
    );
    expect(total(m, "liken_agent_last_trial", { result: "Failed" })).toBe(0);
    expect(
      total(m, "liken_agent_step_duration_seconds_count", { step: "promote", result: "ok" }),
    ).toBe(1);
  }, 800_000);

  it("a release whose kernel panics on its trial falls back by itself, is reported, and is not retried", async () => {
    const sim = fleet.machines.get(L1)!;
    sim.faults = { a: "panic" };
    const bootsBefore = sim.boots.length;
    await approve(W1, v3);
    await fleet.setTarget(v3);
    await waitFor(
      "L1 reports the failed trial while the others run the new release",
      async () => {
        const ms = await Promise.all([L1, L2, W1].map((n) => fleet.api.machines.get(n)));
        const l1 = ms[0]!.status;
        return (
          l1?.step === "Failed" &&
          l1.turnRequest === undefined &&
          runs(v3)(ms[1]!) &&
          runs(v3)(ms[2]!)
        );
      },
      { timeoutMs: 500_000, intervalMs: 500 },
    );
    const l1 = (await fleet.api.machines.get(L1)).status!;
    expect(l1.version).toBe(v2.version);
    expect(l1.bootedSlot).toBe("b");
    expect(l1.lastTrial).toMatchObject({
      version: v3.version,
      digest: v3.digest,
      slot: "a",
      result: "Failed",
    });
    expect(l1.failedReleases?.map((f) => f.digest)).toContain(v3.digest);
    expect(l1.conditions?.find((c) => c.type === "TrialSucceeded")).toMatchObject({
      status: "False",
      reason: "TrialFellBack",
    });
    // The firmware: one trial of slot a that panicked, then slot b again without help.
    const boots = sim.boots.slice(bootsBefore).map((b) => `${b.slot}:${b.trial}:${b.outcome}`);
    expect(boots).toEqual(["a:true:panicked", "b:false:up"]);
    expect(checkTurnInvariants(fleet.history, LEADERS)).toEqual([]);

    // No loop: while the agent stays alive (two heartbeats later) it tries nothing again.
    const hb = new HeartbeatClient(kubeConfig());
    const renewed = async (): Promise<number> =>
      (await hb.list(fleet.cluster)).find((h) => h.machine === L1)?.renewTime?.getTime() ?? 0;
    const t0 = await renewed();
    let seen = 0;
    await waitFor(
      "two more heartbeats of L1",
      async () => {
        const t = await renewed();
        if (t > t0 && seen === 0) seen = t;
        return seen !== 0 && t > seen;
      },
      { timeoutMs: 60_000, intervalMs: 500 },
    );
    expect(sim.boots.length).toBe(bootsBefore + 2);
    expect((await fleet.api.machines.get(L1)).status?.step).toBe("Failed");
    sim.faults = {};
  }, 800_000);

  it("a new target mid-download withdraws the old one; a reboot in between boots neither", async () => {
    await approve(W1, v5);
    await fleet.setTarget(v4);
    const sim = fleet.machines.get(L2)!;
    await waitFor(
      "L2 downloads the first target",
      async () => {
        const s = (await fleet.api.machines.get(L2)).status;
        return s?.step === "Downloading" && s.target?.version === v4.version;
      },
      { timeoutMs: 200_000, intervalMs: 200 },
    );
    const retargetAt = Date.now();
    await fleet.setTarget(v5);
    // A reboot (power cut) right after the change, before the agent could act on it.
    const bootsBefore = sim.boots.length;
    const slotBefore = sim.boots.at(-1)!.slot;
    await sim.powerCycle();
    await waitFor("L2 booted again", () => Promise.resolve(sim.boots.length > bootsBefore), {
      timeoutMs: 30_000,
      intervalMs: 100,
    });
    // The boot after the cut tried neither release: no trial, the slot it ran before.
    expect(sim.boots[bootsBefore]).toMatchObject({
      slot: slotBefore,
      trial: false,
      outcome: "up",
    });

    await fleet.waitAll("every machine runs the second target", runs(v5), 500_000);
    // v4 was never staged for a trial, never ran, and no turn was ever asked for it.
    for (const name of [L1, L2, W1]) {
      const h = fleet.machineHistory(name);
      expect(h.some((x) => x.version === v4.version)).toBe(false);
      expect(h.some((x) => x.turnRequest === v4.version)).toBe(false);
    }
    const l2AfterRetarget = fleet.machineHistory(L2).filter((h) => h.at > retargetAt);
    const stagedV4 = l2AfterRetarget.filter(
      (h) => (h.object as Machine).status?.staged?.version === v4.version,
    );
    expect(stagedV4.filter((h) => h.step !== "Downloading")).toEqual([]);
    expect(sim.boots.filter((b) => b.trial).length).toBeGreaterThan(0);
    expect(checkTurnInvariants(fleet.history, LEADERS)).toEqual([]);
  }, 800_000);
});
