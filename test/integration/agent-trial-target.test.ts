// The trial boot and the target, with the real agent, the real operator (its failure brake on)
// and the real control plane: the Cluster is retargeted while the machine proves its trial (its
// kubelet does not come up, so the trial is still proving when the change lands). The trial
// boot must not promote a release that is no longer the target: it falls back at once, reports
// an Inconclusive trial (TargetChanged), remembers no failed release (the brake counts none),
// gives the turn back and uncordons, and runs the new target.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ReleaseRef } from "../../src/api/types.js";
import { brakeOf } from "../../src/operator/turns/brake.js";
import { kubectl, waitFor } from "../support/kube.js";
import { Fleet, checkTurnInvariants } from "./agent-harness.js";
import { runFirstRelease } from "./fleet-steps.js";

describe("agent: the Cluster retargeted while the trial boot proves itself", () => {
  const fleet = new Fleet();
  const NAME = `retarget-${Date.now().toString(36)}`;
  let v1: ReleaseRef, v2: ReleaseRef;

  beforeAll(async () => {
    await fleet.start(["2026.10.10-001", "2026.10.12-001"]);
    [v1, v2] = fleet.releases as [ReleaseRef, ReleaseRef];
    // A prove deadline far longer than the test: only the retarget can end this trial.
    await fleet.addMachine(
      { name: NAME, role: "Worker", rebootPolicy: "Auto" },
      { proveMs: 600_000 },
    );
    await runFirstRelease(fleet, "the machine reports Ready");
  }, 300_000);
  afterAll(() => fleet.stop(), 60_000);

  it("falls back at once, reports TargetChanged as Inconclusive, and runs the new target", async () => {
    const sim = fleet.machines.get(NAME)!;
    sim.faults = { b: "kubelet-down" };
    await fleet.setTarget(v2);
    await waitFor(
      "the trial boot of v2 proving itself",
      async () => {
        const s = (await fleet.api.machines.get(NAME)).status;
        return s?.updateStage === "Proving" && s.bootedSlot === "b";
      },
      { timeoutMs: 200_000, intervalMs: 300 },
    );
    // Back to v1 while the trial boot waits for a rejoin that will not come.
    await fleet.setTarget(v1);

    // The status says Ready in the same tick that gives the turn back and uncordons.
    const cordoned = async () =>
      (await kubectl(["get", "node", NAME, "-o", "jsonpath={.spec.unschedulable}"])).stdout ===
      "true";
    await waitFor(
      "back on v1, Ready, the turn given back, uncordoned",
      async () => {
        const m = await fleet.api.machines.get(NAME);
        const c = await fleet.api.clusters.get(fleet.cluster);
        return (
          !(await cordoned()) &&
          m.status?.version === v1.version &&
          m.status.step === "Ready" &&
          m.status.lastTrial?.reason === "TargetChanged" &&
          m.status.turnRequest === undefined &&
          (c.status?.rebootTurns ?? []).length === 0
        );
      },
      { timeoutMs: 200_000, intervalMs: 300 },
    );
    const m = await fleet.api.machines.get(NAME);
    const s = m.status!;
    expect(s.bootedSlot).toBe("a");
    expect(s.lastTrial).toMatchObject({
      version: v2.version,
      slot: "b",
      result: "Inconclusive",
      reason: "TargetChanged",
    });
    expect(s.lastTrial?.message).toMatch(
      /the Cluster's target is now 2026\.10\.10-001; not promoted, falling back/,
    );
    expect(s.failedReleases ?? []).toEqual([]);
    expect(s.conditions?.find((c) => c.type === "TrialSucceeded")).toMatchObject({
      status: "Unknown",
      reason: "TargetChanged",
    });
    // Not a failed trial of v2: the brake would not hold it if v2 were the target again.
    const cluster = await fleet.api.clusters.get(fleet.cluster);
    expect(brakeOf(cluster, [m], v2).failed).toEqual([]);
    // The trial of b, given up by the retarget (no prove deadline passed), then a again.
    const boots = sim.boots.map((x) => `${x.slot}:${x.trial}:${x.fault}`);
    expect(boots).toEqual(["a:false:none", "b:true:kubelet-down", "a:false:none"]);
    expect(checkTurnInvariants(fleet.history, new Set())).toEqual([]);
  }, 600_000);
});
