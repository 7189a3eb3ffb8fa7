// A Machine status write the API server refuses (422 Invalid), with the real agent on the real
// control plane. A ValidatingAdmissionPolicy plays a Machine CRD tighter than this agent's (an
// older CRD installed): the agent says so on the Machine (condition StatusWriteRefused and an
// Event), writes the same status again only after its backoff, and once the server accepts,
// its report is there and the condition is gone.
import { readFile } from "node:fs/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Machine, ReleaseRef } from "../../src/api/types.js";
import { clusterEventMessages, waitFor } from "../support/kube.js";
import { applyRefusingPolicy } from "../support/refusing-policy.js";
import { Fleet } from "./agent-harness.js";

const refusedCondition = (m: Machine | undefined) =>
  m?.status?.conditions?.find((c) => c.type === "StatusWriteRefused");

describe("agent: a status write the API server refuses", () => {
  const fleet = new Fleet();
  const name = `ref-${Date.now().toString(36)}`;
  const policy = `liken-test-refuse-${name}`;
  let v1: ReleaseRef;

  let removePolicy: () => Promise<void> = async () => {};

  beforeAll(async () => {
    await fleet.start(["2026.10.10-001"]);
    [v1] = fleet.releases as [ReleaseRef];
    await fleet.addMachine({ name, role: "Worker", rebootPolicy: "Auto" });
    // Refuses any status of this Machine that names a step, as a CRD without the agent's
    // steps would: 422 Invalid with the policy's message.
    removePolicy = await applyRefusingPolicy({
      name: policy,
      apiGroup: "liken.sh",
      resources: ["machines/status"],
      operations: ["UPDATE"],
      match: `object.metadata.name == '${name}'`,
      allow: "!has(object.status.step)",
      message: "status.step: Unsupported value (test policy)",
      reason: "Invalid",
    });
    await waitFor(
      "the API server enforces the test policy",
      async () => {
        const m = await fleet.api.machines.get(name);
        return fleet.api.machines
          .replaceStatus({ ...m, status: { step: "Ready" } }, { dryRun: true })
          .then(
            () => false,
            (e: unknown) => (e as { httpStatus?: number }).httpStatus === 422,
          );
      },
      { timeoutMs: 30_000, intervalMs: 300 },
    );
    fleet.powerOnAll();
  }, 300_000);
  afterAll(async () => {
    await removePolicy();
    await fleet.stop();
  }, 60_000);

  it("is a condition and an Event, waits its backoff, and recovers", async () => {
    const refused = await waitFor(
      "the Machine carries StatusWriteRefused",
      async () => refusedCondition(await fleet.api.machines.get(name)),
      { timeoutMs: 60_000, intervalMs: 300 },
    );
    expect(refused).toMatchObject({ status: "True", reason: "StatusInvalid" });
    expect(refused.message).toContain(`status write of Machine ${name} (422 Invalid)`);
    expect(refused.message).toContain("status.step: Unsupported value (test policy)");
    expect(refused.message).toContain("kubectl get crd machines.liken.sh -o yaml");
    expect((await fleet.api.machines.get(name)).status?.step).toBeUndefined();
    await waitFor(
      "a StatusWriteRefused Event on the Machine",
      async () => (await clusterEventMessages(name, "StatusWriteRefused")).includes("422 Invalid"),
      { timeoutMs: 30_000, intervalMs: 500 },
    );

    // The same status again only after the first wait (10 s); the agent ticks every 0.5 s.
    const logFile = fleet.machines.get(name)!.logFile;
    const refusals = async (): Promise<number[]> =>
      (await readFile(logFile, "utf8"))
        .split("\n")
        .filter((l) => l.startsWith("{") && l.includes(`status write of Machine ${name} (422`))
        .map((l) => {
          const t = (JSON.parse(l) as { time: number | string }).time;
          return typeof t === "number" ? t : Date.parse(t);
        });
    const [first, second] = await waitFor(
      "the agent writes again after its backoff",
      async () => {
        const r = await refusals();
        return r.length >= 2 ? r : undefined;
      },
      { timeoutMs: 40_000, intervalMs: 500 },
    );
    expect(second! - first!).toBeGreaterThanOrEqual(9_000);

    await removePolicy();
    const m = await waitFor(
      "the agent's report written once the server accepts it",
      async () => {
        const m = await fleet.api.machines.get(name);
        return m.status?.version === v1.version ? m : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 300 },
    );
    expect(refusedCondition(m)).toBeUndefined();
  });
});
