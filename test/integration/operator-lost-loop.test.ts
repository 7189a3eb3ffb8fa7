// Lost and back, on the real control plane: a live agent (the real `liken agent run`) whose
// heartbeat Lease writes the API server refuses (a ValidatingAdmissionPolicy stands for a
// broken RBAC rule or admission webhook), and the real `liken operator`. The operator marks the
// machine Lost; the agent, alive and watching its Machine, writes its own step back. Before
// the fix the two did so at the operator's tick, with no end: a Machine PATCH, an agent PUT and
// a MachineLost Event every second. Now the operator yields once (Alive=False, reason
// HeartbeatUnseen, the agent's step left alone), and the machine still counts as Lost.
import { CoreV1Api } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { heartbeatLeaseName, HEARTBEAT_NAMESPACE } from "../../src/api/types.js";
import type { Machine, MachineCondition, ReleaseRef } from "../../src/api/types.js";
import { kubeConfig, kubectl, waitFor } from "../support/kube.js";
import { applyRefusingPolicy } from "../support/refusing-policy.js";
import { Fleet } from "./agent-harness.js";
import { startOperator, type OperatorProcess } from "./operator-fleet.js";

/** The operator's Lost threshold here: four of the harness agents' 5 s heartbeats. */
const LOST_AFTER_S = 20;
/**
 * How long the writes are counted once the operator first marked the machine Lost. The
 * operator looks at every Cluster each second (its tick): without a yield, this window holds
 * one round of the loop per second.
 */
const WINDOW_MS = 15_000;

function alive(m: Machine | undefined): MachineCondition | undefined {
  return m?.status?.conditions?.find((c) => c.type === "Alive");
}

describe("operator: a live agent whose heartbeat it cannot see", () => {
  const fleet = new Fleet();
  const NAME = `lostloop-${Date.now().toString(36)}`;
  const POLICY = `liken-test-refuse-${NAME}`;
  let removePolicy: () => Promise<void> = async () => {};
  const core = kubeConfig().makeApiClient(CoreV1Api);
  let op: OperatorProcess | undefined;
  let v1: ReleaseRef;

  /** The operator's Events about this Cluster by reason (each record is one Event). */
  async function events(): Promise<Record<string, number>> {
    const list = await core.listNamespacedEvent({
      namespace: "default",
      fieldSelector: `involvedObject.name=${fleet.cluster}`,
    });
    const out: Record<string, number> = {};
    for (const e of list.items) out[e.reason ?? ""] = (out[e.reason ?? ""] ?? 0) + (e.count ?? 1);
    return out;
  }

  beforeAll(async () => {
    await fleet.start(["2026.10.10-001"]);
    [v1] = fleet.releases as [ReleaseRef];
    await fleet.addMachine({ name: NAME, role: "Worker", rebootPolicy: "Auto" });
    fleet.powerOnAll();
    await fleet.waitAll("the machine reports Ready", (m) => m.status?.version === v1.version);
  }, 300_000);
  afterAll(async () => {
    await op?.stop();
    await removePolicy();
    await fleet.stop();
  }, 60_000);

  it("yields once with HeartbeatUnseen, with bounded writes, and comes back when the Lease is written", async () => {
    const lease = heartbeatLeaseName(NAME);
    removePolicy = await applyRefusingPolicy({
      name: POLICY,
      apiGroup: "coordination.k8s.io",
      resources: ["leases"],
      operations: ["CREATE", "UPDATE"],
      allow: `!(object.metadata.namespace == '${HEARTBEAT_NAMESPACE}' && object.metadata.name == '${lease}')`,
      message: `test: the heartbeat Lease ${lease} may not be written`,
    });
    // The policy takes effect when the API server has compiled it: a write of the Lease by
    // the test itself is refused from then on.
    await waitFor(
      "the API server to refuse writes of the heartbeat Lease",
      async () => {
        const r = await kubectl([
          "annotate",
          "lease",
          "-n",
          HEARTBEAT_NAMESPACE,
          lease,
          "--overwrite",
          `liken.sh/probe=${Date.now()}`,
        ]);
        return r.code !== 0 && /may not be written/.test(r.stderr);
      },
      { timeoutMs: 30_000, intervalMs: 500 },
    );
    op = startOperator({
      args: ["--start-grace", "1s", "--lost-after", `${LOST_AFTER_S}s`, "--no-leader-elect"],
    });

    await waitFor(
      "the operator to mark the machine Lost",
      async () => alive(await fleet.api.machines.get(NAME))?.status === "False",
      { timeoutMs: (LOST_AFTER_S + 60) * 1000, intervalMs: 250 },
    );
    // The mark's Event follows its write: the window starts once it is there, so the one
    // MachineLost of the first mark is never counted as a second.
    const before = await waitFor(
      "the MachineLost Event of the first mark",
      async () => {
        const e = await events();
        return (e.MachineLost ?? 0) >= 1 ? e : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 100 },
    );
    const from = Date.now();
    // The window is the measurement itself (writes per unit of time), not a wait for a state.
    await new Promise((r) => setTimeout(r, WINDOW_MS));
    const writes = fleet.history.filter(
      (h) => h.kind === "Machine" && h.name === NAME && h.at >= from,
    ).length;
    const after = await events();
    const lostEvents = (after.MachineLost ?? 0) - (before.MachineLost ?? 0);
    const seen = { writes, lostEvents, unseen: after.HeartbeatUnseen ?? 0 };
    // Yielding costs at most: the agent's write back, the operator's HeartbeatUnseen mark.
    expect(seen, `Machine writes and Events in ${WINDOW_MS} ms: ${JSON.stringify(seen)}`).toEqual({
      writes: expect.any(Number) as number,
      lostEvents: 0,
      unseen: 1,
    });
    expect(writes).toBeLessThanOrEqual(2);

    const m = await fleet.api.machines.get(NAME);
    expect(m.status?.step).toBe("Ready"); // the agent's step, left alone
    expect(alive(m)).toMatchObject({ status: "False", reason: "HeartbeatUnseen" });
    expect(alive(m)?.message).toContain(`liken-heartbeats/${NAME}`);
    // Still Lost for the budget: the Cluster does not count it among the machines up.
    const c = await fleet.api.clusters.get(fleet.cluster);
    expect(c.status?.machines).toBe("0/1");
    expect(c.status?.counts).toMatchObject({ lost: 1, unavailable: 1 });

    // The Lease may be written again: the next renewal brings the machine back.
    await removePolicy();
    const back = await waitFor(
      "Alive=True after the heartbeat returned",
      async () => {
        const x = await fleet.api.machines.get(NAME);
        return alive(x)?.status === "True" ? x : undefined;
      },
      { timeoutMs: 90_000, intervalMs: 250 },
    );
    expect(alive(back)?.reason).toBe("HeartbeatReturned");
    expect(back.status?.step).toBe("Ready");
    expect(op.log()).toContain("HeartbeatUnseen");
  }, 300_000);
});
