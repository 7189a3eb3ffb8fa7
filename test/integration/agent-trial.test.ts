// The check before each trial and the agent's own prove deadline, on the real control plane
// with the real operator:
//   - a slot whose bytes changed after staging fails the read-back: the machine reboots
//     WITHOUT the trial (the page: "it reboots without the trial when they do not match"),
//     reports why, and gives the turn back;
//   - a trial boot whose network never comes up cannot rejoin: the agent's prove deadline
//     reboots it, GRUB boots the old default, and the agent reports the failed trial.
import { open } from "node:fs/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ReleaseRef } from "../../src/api/types.js";
import { waitFor } from "../support/kube.js";
import { Fleet, checkTurnInvariants } from "./agent-harness.js";

describe("agent: the slot check before the trial, and a trial that never rejoins", () => {
  const fleet = new Fleet();
  const suffix = Date.now().toString(36);
  const TAMPERED = `tamper-${suffix}`;
  const NONET = `nonet-${suffix}`;
  let v1: ReleaseRef, v2: ReleaseRef;

  beforeAll(async () => {
    // Both machines fail the release: the operator's failure brake is off for this test.
    await fleet.start(["2026.10.10-001", "2026.10.12-001"], { rollout: { maxFailedTrials: 0 } });
    [v1, v2] = fleet.releases as [ReleaseRef, ReleaseRef];
    await fleet.addMachine({ name: TAMPERED, role: "Worker", rebootPolicy: "Manual" });
    await fleet.addMachine({ name: NONET, role: "Worker", rebootPolicy: "Auto" });
    await fleet.startRealOperator();
    fleet.powerOnAll();
    await fleet.waitAll("both machines report Ready", (m) => m.status?.version === v1.version);
  }, 300_000);
  afterAll(() => fleet.stop(), 60_000);

  it("reboots without the trial when the slot no longer matches, and falls back from a trial that never rejoins", async () => {
    fleet.machines.get(NONET)!.faults = { b: "no-network" };
    await fleet.setTarget(v2);
    await waitFor(
      "the Manual machine staged the release and waits for approval",
      async () => (await fleet.api.machines.get(TAMPERED)).status?.step === "RebootPending",
      { timeoutMs: 200_000, intervalMs: 300 },
    );
    // Flip one byte of the staged slot (the kernel artifact starts at offset 0).
    const tampered = fleet.machines.get(TAMPERED)!;
    const fh = await open(tampered.slotFile("b"), "r+");
    const b = Buffer.alloc(1);
    await fh.read(b, 0, 1, 100);
    b[0] = b[0]! ^ 0xff;
    await fh.write(b, 0, 1, 100);
    await fh.sync();
    await fh.close();
    const at = new Date().toISOString().replace(/\.\d+Z$/, "Z");
    await fleet.api.machines.patch(TAMPERED, {
      spec: { approval: { version: v2.version, digest: v2.digest, by: "agent-test", at } },
    });

    await waitFor(
      "both machines report their failure, back on the first release, turns given back",
      async () => {
        const [t, n] = await Promise.all([
          fleet.api.machines.get(TAMPERED),
          fleet.api.machines.get(NONET),
        ]);
        const c = await fleet.api.clusters.get(fleet.cluster);
        return (
          t.status?.step === "Failed" &&
          n.status?.step === "Failed" &&
          // the trial record can land in a later status write than the step
          t.status.lastTrial !== undefined &&
          n.status.lastTrial !== undefined &&
          t.status.turnRequest === undefined &&
          n.status.turnRequest === undefined &&
          (c.status?.rebootTurns ?? []).length === 0
        );
      },
      { timeoutMs: 400_000, intervalMs: 500 },
    );

    const t = (await fleet.api.machines.get(TAMPERED)).status!;
    expect(t.version).toBe(v1.version);
    expect(t.lastTrial).toMatchObject({
      version: v2.version,
      result: "Skipped",
      reason: "SlotCheckMismatch",
    });
    expect(t.lastTrial?.message).toMatch(/kernel/);
    expect(t.slots?.find((s) => s.name === "b")?.state).toBe("Withdrawn");
    // The firmware booted slot a twice, never b: the reboot without the trial.
    expect(tampered.boots.map((x) => `${x.slot}:${x.trial}`)).toEqual(["a:false", "a:false"]);

    const n = (await fleet.api.machines.get(NONET)).status!;
    expect(n.version).toBe(v1.version);
    expect(n.bootedSlot).toBe("a");
    expect(n.lastTrial).toMatchObject({
      version: v2.version,
      slot: "b",
      result: "Failed",
      reason: "TrialFellBack",
    });
    // The agent on the trial boot said why it gave up, and the report after the fallback keeps it.
    expect(n.lastTrial?.message).toMatch(
      /did not rejoin within \d+ ms \(API server not reachable\)/,
    );
    expect(n.failedReleases?.map((f) => f.digest)).toEqual([v2.digest]);
    // The trial of b came up without a network; the agent's deadline rebooted it into a.
    const nboots = fleet.machines.get(NONET)!.boots.map((x) => `${x.slot}:${x.trial}:${x.fault}`);
    expect(nboots).toEqual(["a:false:none", "b:true:no-network", "a:false:none"]);
    expect(checkTurnInvariants(fleet.history, new Set())).toEqual([]);
  }, 600_000);
});
