// The check before each trial and the agent's own prove deadline, on the real control plane
// with the real operator:
//   - a slot whose bytes changed after staging fails the read-back: the machine reboots
//     WITHOUT the trial (the page: "it reboots without the trial when they do not match"),
//     reports why, and gives the turn back;
//   - a trial boot whose network never comes up cannot rejoin: the agent's prove deadline
//     reboots it, GRUB boots the old default, and the agent reports the trial as Inconclusive
//     (TrialUnobserved): a failure to look is no verdict, so the release is not remembered as
//     failed and the machine tries it again (which, with its network back, succeeds);
//   - a trial boot whose kubelet never starts: the Node keeps the previous boot's bootID and
//     Ready=True (kwok keeps it Ready), and the agent does not take that for a rejoin: its
//     prove deadline reboots it with NodeNotRejoined, naming the Node and the bootIDs seen.
import { open, readFile } from "node:fs/promises";
import { CoreV1Api } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ReleaseRef } from "../../src/api/types.js";
import { kubeConfig, waitFor } from "../support/kube.js";
import { Fleet, checkTurnInvariants } from "./agent-harness.js";
import { approveReboot, runFirstRelease } from "./fleet-steps.js";

describe("agent: the slot check before the trial, and a trial that never rejoins", () => {
  const fleet = new Fleet();
  const suffix = Date.now().toString(36);
  const TAMPERED = `tamper-${suffix}`;
  const NONET = `nonet-${suffix}`;
  const NOKUBELET = `nokubelet-${suffix}`;
  let v1: ReleaseRef, v2: ReleaseRef;

  beforeAll(async () => {
    // Both machines fail the release: the operator's failure brake is off for this test.
    await fleet.start(["2026.10.10-001", "2026.10.12-001"], { rollout: { maxFailedTrials: 0 } });
    [v1, v2] = fleet.releases as [ReleaseRef, ReleaseRef];
    await fleet.addMachine({ name: TAMPERED, role: "Worker", rebootPolicy: "Manual" });
    await fleet.addMachine({ name: NONET, role: "Worker", rebootPolicy: "Auto" });
    await fleet.addMachine({ name: NOKUBELET, role: "Worker", rebootPolicy: "Auto" });
    await runFirstRelease(fleet, "every machine reports Ready");
  }, 300_000);
  afterAll(() => fleet.stop(), 60_000);

  it("the stand-in kubelet posts each boot's id to its Node, as a kubelet starting in it does", async () => {
    const sim = fleet.machines.get(NONET)!;
    const bootId = (await readFile(sim.bootIdFile, "utf8")).trim();
    const node = await kubeConfig().makeApiClient(CoreV1Api).readNode({ name: NONET });
    expect(node.status?.nodeInfo?.bootID).toBe(bootId);
    const ready = node.status?.conditions?.find((c) => c.type === "Ready");
    expect(ready?.status).toBe("True");
    const booted = sim.boots[0]!.at;
    // The heartbeat has whole seconds.
    expect(new Date(ready!.lastHeartbeatTime!).getTime()).toBeGreaterThanOrEqual(booted - 1_000);
  });

  it("reboots without the trial when the slot no longer matches, and falls back from trials that never rejoin", async () => {
    fleet.machines.get(NONET)!.faults = { b: "no-network" };
    fleet.machines.get(NOKUBELET)!.faults = { b: "kubelet-down" };
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
    await approveReboot(fleet, TAMPERED, v2, "agent-test");

    // The network-less trial's report; its retry is let through once it is seen.
    const nonet = fleet.machines.get(NONET)!;
    await waitFor(
      "the network-less trial reported as Inconclusive, back on the first release",
      async () => {
        const n = (await fleet.api.machines.get(NONET)).status;
        return n?.lastTrial?.result === "Inconclusive" && n.bootedSlot === "a";
      },
      { timeoutMs: 400_000, intervalMs: 500 },
    );
    const n = (await fleet.api.machines.get(NONET)).status!;
    expect(n.version).toBe(v1.version);
    expect(n.lastTrial).toMatchObject({
      version: v2.version,
      slot: "b",
      result: "Inconclusive",
      reason: "TrialUnobserved",
    });
    // The agent on the trial boot said why it gave up, and the report after the fallback keeps it.
    expect(n.lastTrial?.message).toMatch(
      /did not rejoin within \d+ ms: never read Node \S+ \(API server not reachable\); no verdict on the release/,
    );
    expect(n.failedReleases ?? []).toEqual([]);
    expect(n.conditions?.find((c) => c.type === "TrialSucceeded")).toMatchObject({
      status: "Unknown",
      reason: "TrialUnobserved",
    });
    nonet.faults = {};

    await waitFor(
      "the two failures reported, the network-less machine on the target after trying again, turns given back",
      async () => {
        const [t, k, n] = await Promise.all([
          fleet.api.machines.get(TAMPERED),
          fleet.api.machines.get(NOKUBELET),
          fleet.api.machines.get(NONET),
        ]);
        const c = await fleet.api.clusters.get(fleet.cluster);
        return (
          t.status?.step === "Failed" &&
          k.status?.step === "Failed" &&
          // the trial record can land in a later status write than the step
          t.status.lastTrial !== undefined &&
          k.status.lastTrial !== undefined &&
          t.status.turnRequest === undefined &&
          k.status.turnRequest === undefined &&
          n.status?.version === v2.version &&
          n.status.step === "Ready" &&
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

    // The trial of b came up without a network and its deadline rebooted it into a; the
    // second trial of b, with the network back, was promoted.
    const nboots = nonet.boots.map((x) => `${x.slot}:${x.trial}:${x.fault}`);
    expect(nboots).toEqual(["a:false:none", "b:true:no-network", "a:false:none", "b:true:none"]);
    expect((await fleet.api.machines.get(NONET)).status?.lastTrial).toMatchObject({
      version: v2.version,
      result: "Succeeded",
    });

    // The kubelet-less trial: the Node showed the last boot's id (and kwok's Ready=True) for the
    // whole deadline; never promoted, remembered as failed, with the Node and both ids named.
    const kube = fleet.machines.get(NOKUBELET)!;
    const k = (await fleet.api.machines.get(NOKUBELET)).status!;
    expect(k.version).toBe(v1.version);
    expect(k.bootedSlot).toBe("a");
    expect(k.lastTrial).toMatchObject({
      version: v2.version,
      slot: "b",
      result: "Failed",
      reason: "NodeNotRejoined",
    });
    const [firstId] = kube.postedBootIds;
    expect(k.lastTrial?.message).toContain(
      `Node ${NOKUBELET} shows bootID ${firstId}, not this boot's`,
    );
    expect(k.lastTrial?.message).toMatch(/bootIDs it showed on this boot: \S+\)/);
    expect(k.failedReleases?.map((f) => f.digest)).toEqual([v2.digest]);
    const kboots = kube.boots.map((x) => `${x.slot}:${x.trial}:${x.fault}`);
    expect(kboots).toEqual(["a:false:none", "b:true:kubelet-down", "a:false:none"]);
    expect(checkTurnInvariants(fleet.history, new Set())).toEqual([]);
  }, 600_000);
});
