// The page's section 3 on the real control plane: three simulated machines (the real agent,
// file-backed slots, the firmware model, reboots played by the supervisor) move to a new
// release; every check reads the API objects an independent watcher recorded.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Fleet, checkTurnInvariants } from "./agent-harness.js";

describe("agent rollout: Auto leaders, one down at a time", () => {
  const fleet = new Fleet();
  const names = ["l1", "l2", "l3"].map((n) => `${n}-${Date.now().toString(36)}`);

  beforeAll(async () => {
    await fleet.start(["2026.10.10-001", "2026.10.12-001"]);
    for (const name of names)
      await fleet.addMachine({ name, role: "Leader", rebootPolicy: "Auto" });
    fleet.startOperator();
    fleet.powerOnAll();
    await fleet.waitAll(
      "every machine reports Ready on the first release",
      (m) => m.status?.step === "Ready" && m.status.version === "2026.10.10-001",
    );
  }, 300_000);
  afterAll(() => fleet.stop());

  it("moves every machine to the new release, one leader down at a time", async () => {
    const [, v2] = fleet.releases;
    await fleet.setTarget(v2!);
    await fleet.waitAll(
      "every machine runs the new release",
      (m) => m.status?.step === "Ready" && m.status.version === v2!.version,
      280_000,
    );
    expect(checkTurnInvariants(fleet.history, new Set(names))).toEqual([]);
    for (const name of names) {
      const steps = fleet.machineHistory(name).map((h) => h.step);
      // Section 4's words, in order, for each machine.
      const seq = steps.filter((s, i) => s !== steps[i - 1]);
      expect(seq).toEqual(
        expect.arrayContaining(["Downloading", "UpdatePending", "Updating", "Ready"]),
      );
      const sim = fleet.machines.get(name)!;
      // Booted slot b once as a trial, and it is the default now.
      expect(sim.boots.filter((b) => b.trial).map((b) => b.slot)).toEqual(["b"]);
      const last = (await fleet.api.machines.get(name)).status!;
      expect(last.bootedSlot).toBe("b");
      expect(last.lastTrial?.result).toBe("Succeeded");
      expect(last.turnRequest).toBeUndefined();
    }
  }, 300_000);
});
