// The API server unreachable while a machine waits for its turn: the agent keeps running,
// never reboots on a turn it cannot read, and resumes when the server answers again. The turn
// is recorded by the test exactly as the protocol says (docs/agent.md), so the record exists
// during the outage: only the agent's own reading may lead to a reboot.
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ReleaseRef } from "../../src/api/types.js";
import { HeartbeatClient } from "../../src/api/heartbeat.js";
import { kubeConfig, kubeconfigPath, controlPlane, waitFor } from "../support/kube.js";
import { ApiProxy, Fleet, checkTurnInvariants } from "./agent-harness.js";

describe("agent: the API server unreachable while a turn is due", () => {
  const fleet = new Fleet();
  const proxy = new ApiProxy(new URL(controlPlane().server));
  const name = `out-${Date.now().toString(36)}`;
  let v1: ReleaseRef, v2: ReleaseRef;

  beforeAll(async () => {
    await fleet.start(["2026.10.10-001", "2026.10.12-001"]);
    [v1, v2] = fleet.releases as [ReleaseRef, ReleaseRef];
    await proxy.open();
    const kc = await proxy.kubeconfig(kubeconfigPath(), path.join(fleet.dir, "proxy.kubeconfig"));
    await fleet.addMachine({ name, role: "Leader", rebootPolicy: "Auto" }, {}, kc);
    fleet.powerOnAll();
    await fleet.waitAll("the machine reports Ready", (m) => m.status?.version === v1.version);
  }, 300_000);
  afterAll(async () => {
    await proxy.cut();
    await fleet.stop();
  }, 60_000);

  it("keeps serving without rebooting, and resumes when the server returns", async () => {
    const sim = fleet.machines.get(name)!;
    await fleet.setTarget(v2);
    await waitFor(
      "the machine staged the release and asks for a turn",
      async () => {
        const s = (await fleet.api.machines.get(name)).status;
        return s?.step === "UpdatePending" && s.turnRequest?.version === v2.version;
      },
      { timeoutMs: 200_000, intervalMs: 300 },
    );
    await proxy.cut();
    // The turn is granted while the agent cannot read it.
    await fleet.api.clusters.updateStatus(fleet.cluster, (c) => ({
      ...c,
      status: {
        ...c.status,
        rebootTurns: [
          {
            machine: name,
            grantedAt: new Date().toISOString().replace(/\.\d+Z$/, "Z"),
            grantedBy: "agent-test",
            leader: true,
            version: v2.version,
            digest: v2.digest,
          },
        ],
      },
    }));
    // The outage lasts until the agent's heartbeat is 15 s old (three missed renewals).
    const hb = new HeartbeatClient(kubeConfig());
    await waitFor(
      "the heartbeat to go 15 s stale",
      async () => {
        const h = (await hb.list(fleet.cluster)).find((x) => x.machine === name);
        return h?.renewTime !== undefined && Date.now() - h.renewTime.getTime() > 15_000;
      },
      { timeoutMs: 60_000, intervalMs: 500 },
    );
    // It kept running (no exit, no reboot) and did not act on the turn it could not read.
    expect(sim.exits).toEqual([]);
    expect(sim.boots).toHaveLength(1);
    const during = (await fleet.api.machines.get(name)).status!;
    expect(during.step).toBe("UpdatePending");

    await proxy.open();
    await waitFor(
      "the machine runs the new release after the outage",
      async () => {
        const m = await fleet.api.machines.get(name);
        return m.status?.step === "Ready" && m.status.version === v2.version;
      },
      { timeoutMs: 200_000, intervalMs: 300 },
    );
    expect(sim.boots.map((b) => `${b.slot}:${b.trial}`)).toEqual(["a:false", "b:true"]);
    expect(checkTurnInvariants(fleet.history, new Set([name]))).toEqual([]);
    // SIGTERM (systemd's stop): the agent finishes its step and exits 0.
    await sim.stop();
    expect(sim.exits.at(-1)).toBe(0);
  }, 500_000);
});
