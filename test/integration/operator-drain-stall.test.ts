// The stall of a turn whose drain a PodDisruptionBudget holds, with the real operator and the
// real agent on the real control plane: the turn deadline (15 s here) comes long before the
// drain's own deadline, and the RolloutStalled condition and Event already name the pod and
// its budget, because the agent wrote its blocker as soon as the drain met it
// (docs/operator.md, "Stall").
import { beforeAll, describe, expect, it } from "vitest";
import type { ReleaseRef } from "../../src/api/types.js";
import { clusterEventMessages, waitFor } from "../support/kube.js";
import { heldDrain } from "./held-drain.js";

const HELD = `stall-${Date.now().toString(36)}`;
/** The drain's own deadline: the stall must come from the turn deadline, well before it. */
const DRAIN_MS = 600_000;

describe("a stalled turn whose drain a budget holds", () => {
  const { fleet, ns } = heldDrain({
    versions: ["2026.10.10-001", "2026.10.12-001"],
    held: HELD,
    drainMs: DRAIN_MS,
    namespace: "stall",
    runs: "the machine runs the first release",
    operatorArgs: ["--turn-deadline", "15s"],
  });
  let v2: ReleaseRef;
  beforeAll(() => {
    [, v2] = fleet.releases as [ReleaseRef, ReleaseRef];
  });

  it("RolloutStalled names the pod and its PodDisruptionBudget", async () => {
    await fleet.setTarget(v2);
    const progressing = await waitFor(
      "the Cluster's Progressing reads RolloutStalled",
      async () => {
        const c = await fleet.api.clusters.get(fleet.cluster);
        const p = c.status?.conditions?.find((x) => x.type === "Progressing");
        return p?.reason === "RolloutStalled" ? p : undefined;
      },
      { timeoutMs: 150_000, intervalMs: 500 },
    );
    const blocked = new RegExp(
      `Its drain is blocked by pod ${ns()}/db-[a-z0-9-]+ held by PodDisruptionBudget ${ns()}/db since `,
    );
    expect(progressing.message).toMatch(new RegExp(`Machine ${HELD} holds a reboot turn`));
    expect(progressing.message).toMatch(blocked);
    // The Event is written once, when the turn stalls: the blocker was known by then.
    const events = await waitFor(
      "a RolloutStalled Event",
      async () => (await clusterEventMessages(fleet.cluster, "RolloutStalled")) || undefined,
      { timeoutMs: 30_000, intervalMs: 500 },
    );
    expect(events).toMatch(blocked);
  }, 300_000);
});
