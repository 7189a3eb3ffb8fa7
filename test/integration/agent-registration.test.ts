// Registration that protects by default, on the real control plane with the real agent (a
// simulated machine running `liken agent run`): a Machine its agent registers takes its role
// from its Node (a control-plane label makes it Leader), agent.yaml's role and rebootPolicy win,
// and `kubectl get machines` shows where the role came from (ROLE-FROM).
import { CoreV1Api } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Machine, ReleaseRef } from "../../src/api/types.js";
import { kubeConfig, kubectl, waitFor } from "../support/kube.js";
import { Fleet } from "./agent-harness.js";

const CONTROL_PLANE = "node-role.kubernetes.io/control-plane";

describe("agent: the Machine it registers", () => {
  const fleet = new Fleet();
  const id = Date.now().toString(36);
  const byNode = `reg-node-${id}`;
  const byConfig = `reg-config-${id}`;
  let v1: ReleaseRef;

  beforeAll(async () => {
    await fleet.start(["2026.10.10-001"]);
    [v1] = fleet.releases as [ReleaseRef];
    // The harness creates each Machine (as the lab does); the agent registers it again once
    // it is deleted, which is the registration under test.
    await fleet.addMachine({ name: byNode, role: "Worker", rebootPolicy: "Auto" });
    await fleet.addMachine({
      name: byConfig,
      role: "Leader",
      rebootPolicy: "Manual",
      agentYaml: { role: "Worker", rebootPolicy: "Auto" },
    });
    const core = kubeConfig().makeApiClient(CoreV1Api);
    for (const n of [byNode, byConfig]) {
      const node = await core.readNode({ name: n });
      node.metadata!.labels = { ...node.metadata!.labels, [CONTROL_PLANE]: "" };
      await core.replaceNode({ name: n, body: node });
    }
    fleet.powerOnAll();
    await fleet.waitAll(
      "the machines report their release",
      (m) => m.status?.version === v1.version,
    );
  }, 300_000);
  afterAll(async () => {
    await fleet.stop();
  }, 60_000);

  it("a control-plane Node's Machine registers as Leader; agent.yaml's role and policy win; ROLE-FROM says which", async () => {
    const before = new Map<string, string>();
    for (const n of [byNode, byConfig]) {
      before.set(n, (await fleet.api.machines.get(n)).metadata.uid!);
      await fleet.api.machines.delete(n);
    }
    const registered = async (n: string): Promise<Machine> =>
      waitFor(
        `${n} registered again by its agent, with status.registration`,
        async () => {
          const m = await fleet.api.machines.find(n);
          if (m === undefined || m.metadata.uid === before.get(n)) return undefined;
          return m.status?.registration !== undefined ? m : undefined;
        },
        { timeoutMs: 60_000, intervalMs: 250 },
      );
    const [a, b] = await Promise.all([registered(byNode), registered(byConfig)]);
    expect(a.spec).toMatchObject({ role: "Leader", rebootPolicy: "Manual" });
    expect(a.status?.registration).toMatchObject({
      roleFrom: "NodeLabel",
      rebootPolicyFrom: "Default",
    });
    expect(b.spec).toMatchObject({ role: "Worker", rebootPolicy: "Auto" });
    expect(b.status?.registration).toMatchObject({
      roleFrom: "AgentConfig",
      rebootPolicyFrom: "AgentConfig",
    });

    const out = await kubectl(["get", "machines", byNode, byConfig]);
    expect(out.code, out.stderr).toBe(0);
    const rows = out.stdout
      .trim()
      .split("\n")
      .map((l) => l.trim().split(/\s+/));
    const col = rows[0]!.indexOf("ROLE-FROM");
    expect(rows[0]!.slice(0, 5)).toEqual(["NAME", "CLUSTER", "ROLE", "ROLE-FROM", "POLICY"]);
    const row = (n: string) => rows.find((r) => r[0] === n)!;
    expect([row(byNode)[2], row(byNode)[col]]).toEqual(["Leader", "NodeLabel"]);
    expect([row(byConfig)[2], row(byConfig)[col]]).toEqual(["Worker", "AgentConfig"]);
  });
});
