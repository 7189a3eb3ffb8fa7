// A drain held by a PodDisruptionBudget that never allows the eviction, with
// spec.disruption.onDrainTimeout Skip, on the real control plane with the real operator and
// agents: at drainTimeoutSeconds the machine uncordons, gives its turn back, reports
// DrainTimedOut naming the pod and the budget, and goes to the back of the queue; the next
// machine takes the release; the Cluster lists the skipped machine.
import { CoreV1Api } from "@kubernetes/client-node";
import { beforeAll, describe, expect, it } from "vitest";
import type { Cluster, ReleaseRef } from "../../src/api/types.js";
import { clusterEventMessages, kubeConfig, waitFor } from "../support/kube.js";
import { heldDrain } from "./held-drain.js";
import { approveReboot } from "./fleet-steps.js";

const suffix = Date.now().toString(36);
const HELD = `held-${suffix}`;
const FREE = `free-${suffix}`;

describe("a stuck drain with onDrainTimeout Skip", () => {
  // One pod on the held machine's node, and a budget that allows no disruption of it.
  const { fleet, ns } = heldDrain({
    versions: ["2026.10.10-001", "2026.10.12-001"],
    spec: { disruption: { maxUnavailable: 1, drainTimeoutSeconds: 5, onDrainTimeout: "Skip" } },
    held: HELD,
    // Manual: it waits for an approval, so the held machine takes the first turn.
    others: [{ name: FREE, role: "Worker", rebootPolicy: "Manual" }],
    namespace: "stuck",
    runs: "both machines run the first release",
  });
  let v2: ReleaseRef;
  beforeAll(() => {
    [, v2] = fleet.releases as [ReleaseRef, ReleaseRef];
  });

  it("uncordons, gives the turn back, reports the pod and budget, and lets the next machine go first", async () => {
    await fleet.setTarget(v2);
    await waitFor(
      "the held machine drains on its turn",
      async () => (await fleet.api.machines.get(HELD)).status?.updateStage === "Draining",
      { timeoutMs: 200_000, intervalMs: 300 },
    );
    // Approved while the held machine drains: once it gives its turn back, both ask.
    await approveReboot(fleet, FREE, v2, "test");

    const skipped = await waitFor(
      "the held machine reports its drain timed out",
      async () => (await fleet.api.machines.get(HELD)).status?.drainTimedOut,
      { timeoutMs: 120_000, intervalMs: 300 },
    );
    expect(skipped).toMatchObject({
      version: v2.version,
      pod: expect.stringMatching(new RegExp(`^${ns()}/db-`)) as unknown,
      podDisruptionBudget: `${ns()}/db`,
    });
    expect(skipped.message).toContain("did not finish within 5 s");
    // It uncordoned before it reported (and holds no turn until the other machine is done).
    const core = kubeConfig().makeApiClient(CoreV1Api);
    expect((await core.readNode({ name: HELD })).spec?.unschedulable ?? false).toBe(false);

    // The next turn goes to the other machine, which takes the release.
    await waitFor(
      "the free machine runs the release",
      async () => {
        const m = await fleet.api.machines.get(FREE);
        return m.status?.step === "Ready" && m.status.version === v2.version;
      },
      { timeoutMs: 300_000, intervalMs: 500 },
    );
    const grants = fleet.history
      .filter((h) => h.kind === "Cluster")
      .flatMap((h) => (h.object as Cluster).status?.rebootTurns ?? [])
      .filter((t) => t.version === v2.version);
    const order = [...new Map(grants.map((t) => [t.grantedAt + t.machine, t])).values()]
      .sort((a, b) => (a.grantedAt < b.grantedAt ? -1 : 1))
      .map((t) => t.machine);
    expect(order.slice(0, 2)).toEqual([HELD, FREE]);

    // The Cluster lists the skipped machine; the turn was released as DrainTimedOut.
    const c = await fleet.api.clusters.get(fleet.cluster);
    expect(c.status?.drainSkipped).toEqual([
      expect.objectContaining({ machine: HELD, podDisruptionBudget: `${ns()}/db` }),
    ]);
    const events = await clusterEventMessages(fleet.cluster, "TurnReleased");
    expect(events).toContain(`Machine ${HELD} (DrainTimedOut)`);
    // Back in the queue: it asked again as UpdatePending after its drain timed out.
    const heldSteps = fleet.machineHistory(HELD).map((h) => h.step);
    expect(heldSteps.slice(heldSteps.indexOf("Updating"))).toContain("UpdatePending");
  }, 600_000);
});
