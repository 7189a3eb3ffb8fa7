// A trial the bootloader does not take, with the real agent, the real operator and the real
// control plane: the machine's GRUB cannot record the trial start (the firmware model's
// ignoreOneShot: save_env fails, grub.cfg boots the default and leaves next_entry armed). The
// agent must notice on the first boot after arming, and then: no second reboot, the boot-once
// entry disarmed (a later reboot by hand must not boot a trial nobody watches), Failed with
// lastTrial reason TrialNotTaken, the turn given back, the node uncordoned, and the operator's
// failure brake counting it like any failed trial.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ReleaseRef } from "../../src/api/types.js";
import { DirEnvStore } from "../../src/bootloader/envstore.js";
import { GrubBootloader } from "../../src/bootloader/grub.js";
import { waitFor } from "../support/kube.js";
import { Fleet, checkTurnInvariants } from "./agent-harness.js";
import { runFirstRelease, waitUncordoned } from "./fleet-steps.js";

describe("agent: a trial the bootloader did not take", () => {
  const fleet = new Fleet();
  const NAME = `nottaken-${Date.now().toString(36)}`;
  let v1: ReleaseRef, v2: ReleaseRef;

  beforeAll(async () => {
    // The operator's default failure brake (maxFailedTrials 1) stays on: it must count this.
    await fleet.start(["2026.10.10-001", "2026.10.12-001"]);
    [v1, v2] = fleet.releases as [ReleaseRef, ReleaseRef];
    await fleet.addMachine({ name: NAME, role: "Worker", rebootPolicy: "Auto" });
    await runFirstRelease(fleet, "the machine reports Ready");
  }, 300_000);
  afterAll(() => fleet.stop(), 60_000);

  it("reboots once, reports TrialNotTaken, disarms and gives the turn back", async () => {
    const sim = fleet.machines.get(NAME)!;
    sim.quirks = { ignoreOneShot: true };
    await fleet.setTarget(v2);

    const ended = await waitFor(
      "Failed with the trial's record, the turn given back (or a second reboot)",
      async () => {
        // A reboot after the one for the trial is the bug itself: stop waiting at once.
        if (sim.boots.length > 2) return "rebooted again";
        const m = await fleet.api.machines.get(NAME);
        const c = await fleet.api.clusters.get(fleet.cluster);
        return (
          m.status?.step === "Failed" &&
          m.status.lastTrial !== undefined &&
          m.status.turnRequest === undefined &&
          (c.status?.rebootTurns ?? []).length === 0 &&
          "reported"
        );
      },
      { timeoutMs: 300_000, intervalMs: 500 },
    );
    expect(sim.boots.map((b) => `${b.slot}:${b.trial}`)).toEqual(["a:false", "a:false"]);
    expect(ended).toBe("reported");

    const s = (await fleet.api.machines.get(NAME)).status!;
    expect(s.version).toBe(v1.version);
    expect(s.bootedSlot).toBe("a");
    expect(s.lastTrial).toMatchObject({
      version: v2.version,
      digest: v2.digest,
      slot: "b",
      result: "Failed",
      reason: "TrialNotTaken",
    });
    // Which bootloader, what was armed, what booted, what to check.
    expect(s.lastTrial?.message).toMatch(
      /^grub did not take the trial of 2026\.10\.12-001 in slot b/,
    );
    expect(s.lastTrial?.message).toContain("booted slot a again");
    expect(s.lastTrial?.message).toMatch(/saved_entry=a next_entry=b liken_trial=\)/);
    expect(s.lastTrial?.message).toContain("save_env");
    expect(s.failedReleases?.map((f) => [f.digest, f.reason])).toEqual([
      [v2.digest, "TrialNotTaken"],
    ]);

    // One reboot only: power-on into a, the reboot for the trial into a again, nothing after.
    expect(sim.exits.filter((c) => c === 194)).toHaveLength(1);
    // Nothing armed any more: a reboot by anyone boots the old default.
    expect(await new GrubBootloader(new DirEnvStore(sim.espDir)).read()).toMatchObject({
      defaultSlot: "a",
      armed: null,
      started: null,
    });
    // The node serves again.
    const unschedulable = await waitUncordoned(NAME);
    expect(unschedulable).toBe("uncordoned");

    // The operator's failure brake counts it like any failed trial.
    const brake = await waitFor(
      "the Cluster's Progressing condition says ReleaseFailed",
      async () => {
        const c = await fleet.api.clusters.get(fleet.cluster);
        const p = c.status?.conditions?.find((x) => x.type === "Progressing");
        return p?.reason === "ReleaseFailed" ? p : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 300 },
    );
    expect(brake.message).toContain(`${NAME} (TrialNotTaken`);
    expect(checkTurnInvariants(fleet.history, new Set())).toEqual([]);
  }, 600_000);
});
