// A Machine deleted while its agent runs, on the real control plane with the real agent (a
// simulated machine running `liken agent run`): the agent registers its Machine again and
// reports on it, instead of writing the status of a Machine that is gone on every tick.
import { readFile } from "node:fs/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ReleaseRef } from "../../src/api/types.js";
import { waitFor } from "../support/kube.js";
import { Fleet } from "./agent-harness.js";

describe("agent: its Machine deleted while it runs", () => {
  const fleet = new Fleet();
  const name = `del-${Date.now().toString(36)}`;
  let v1: ReleaseRef;

  beforeAll(async () => {
    await fleet.start(["2026.10.10-001"]);
    [v1] = fleet.releases as [ReleaseRef];
    await fleet.addMachine({ name, role: "Worker", rebootPolicy: "Auto" });
    fleet.powerOnAll();
    await fleet.waitAll("the machine reports its release", (m) => m.status?.version === v1.version);
  }, 300_000);
  afterAll(async () => {
    await fleet.stop();
  }, 60_000);

  it("registers the Machine again and reports on it", async () => {
    const before = await fleet.api.machines.get(name);
    await fleet.api.machines.delete(name);

    const again = await waitFor(
      "a new Machine of that name, with the agent's report",
      async () => {
        const m = await fleet.api.machines.find(name);
        if (m === undefined || m.metadata.uid === before.metadata.uid) return undefined;
        return m.status?.version === v1.version ? m : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 200 },
    );
    expect(again.spec).toMatchObject({ cluster: fleet.cluster, nodeName: name });
    expect(again.status?.step).toBe("Ready");
    const log = await readFile(fleet.machines.get(name)!.logFile, "utf8");
    // Registered once (the test created the first Machine), and no write to the gone Machine
    // went on: at most the one write the deletion raced.
    expect(log.split('"registering the Machine"').length - 1).toBe(1);
    expect(log.split('"status not written"').length - 1).toBeLessThanOrEqual(1);
  });
});
