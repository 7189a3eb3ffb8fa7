// A trial the machine cannot arm, with the real agent, the real operator and the real control
// plane: the ESP refuses the arm's writes (the GRUB environment's second copy is made immutable,
// which the kernel refuses to open for writing even for root, as it refuses a read-only or
// failing ESP; reads still work). The agent must count each attempt without a verdict
// (TrialInconclusive, reason TrialNotArmed), never reboot, stop after 3 attempts, give the turn
// back and uncordon, and never record the release as failed: the operator's failure brake
// (ReleaseFailed) stays off. Once the ESP is writable again, a new liken.sh/retry value gets the
// release tried, and it is promoted.
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ANNOTATION_RETRY, type ReleaseRef } from "../../src/api/types.js";
import { ENV_FILES } from "../../src/bootloader/envstore.js";
import { setImmutable } from "../../src/native/index.js";
import { kubectl, waitFor } from "../support/kube.js";
import { Fleet, checkTurnInvariants } from "./agent-harness.js";
import { runFirstRelease, waitUncordoned } from "./fleet-steps.js";

describe("agent: a trial the ESP will not let it arm", () => {
  const fleet = new Fleet();
  const NAME = `notarmed-${Date.now().toString(36)}`;
  let v1: ReleaseRef, v2: ReleaseRef;
  let locked: string | undefined;

  beforeAll(async () => {
    // The operator's default failure brake (maxFailedTrials 1) stays on: it must not count this.
    await fleet.start(["2026.10.10-001", "2026.10.12-001"]);
    [v1, v2] = fleet.releases as [ReleaseRef, ReleaseRef];
    await fleet.addMachine({ name: NAME, role: "Worker", rebootPolicy: "Auto" });
    await runFirstRelease(fleet, "the machine reports Ready");
  }, 300_000);
  afterAll(async () => {
    if (locked !== undefined) setImmutable(locked, false);
    await fleet.stop();
  }, 60_000);

  it("counts 3 attempts without a verdict, gives the turn back, holds; a retry promotes it", async () => {
    const sim = fleet.machines.get(NAME)!;
    locked = path.join(sim.espDir, ENV_FILES[1]);
    expect(setImmutable(locked, true), "the filesystem keeps no attribute flags").toBe(false);
    await fleet.setTarget(v2);

    const held = await waitFor(
      "the machine holds after 3 attempts, the turn given back (or a reboot)",
      async () => {
        // No arm ever succeeded: a reboot would be the bug itself.
        if (sim.boots.length > 1) return "rebooted";
        const m = await fleet.api.machines.get(NAME);
        const c = await fleet.api.clusters.get(fleet.cluster);
        const cond = m.status?.conditions?.find((x) => x.type === "TrialInconclusive");
        return (
          m.status?.step === "Failed" &&
          cond?.message.includes("3 times") === true &&
          m.status.turnRequest === undefined &&
          (c.status?.rebootTurns ?? []).length === 0 &&
          "held"
        );
      },
      { timeoutMs: 120_000, intervalMs: 500 },
    );
    expect(held).toBe("held");
    const s = (await fleet.api.machines.get(NAME)).status!;
    expect(s.version).toBe(v1.version);
    // Never a verdict on the release: what the failure brake reads is empty.
    expect(s.lastTrial).toBeUndefined();
    expect(s.failedReleases).toBeUndefined();
    const cond = s.conditions?.find((x) => x.type === "TrialInconclusive");
    expect(cond).toMatchObject({ status: "True", reason: "TrialNotArmed" });
    expect(cond?.message).toContain("LIKEN_BOOTLOADER_IO");
    expect(cond?.message).toContain(ANNOTATION_RETRY);
    expect(sim.exits.filter((c) => c === 194)).toHaveLength(0);
    const c = await fleet.api.clusters.get(fleet.cluster);
    const progressing = c.status?.conditions?.find((x) => x.type === "Progressing");
    expect(progressing?.reason).not.toBe("ReleaseFailed");
    const uncordoned = await waitUncordoned(NAME);
    expect(uncordoned).toBe("uncordoned");

    // The ESP repaired; a person asks again.
    setImmutable(locked, false);
    locked = undefined;
    await kubectl(["annotate", "machine", NAME, "--overwrite", `${ANNOTATION_RETRY}=after-fsck`]);
    const promoted = await waitFor(
      "the machine runs the target",
      async () => {
        const m = await fleet.api.machines.get(NAME);
        return m.status?.version === v2.version && m.status.step === "Ready" ? m : undefined;
      },
      { timeoutMs: 120_000, intervalMs: 500 },
    );
    expect(promoted.status?.lastTrial).toMatchObject({ ...v2, result: "Succeeded" });
    expect(
      promoted.status?.conditions?.find((x) => x.type === "TrialInconclusive"),
    ).toBeUndefined();
    expect(sim.boots.map((b) => `${b.slot}:${b.trial}`)).toEqual(["a:false", "b:true"]);
    expect(checkTurnInvariants(fleet.history, new Set())).toEqual([]);
  }, 400_000);
});
