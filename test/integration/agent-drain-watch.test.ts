// The drain as the Machine shows it, on the real control plane with the real agent and the
// real cluster-operator (its eviction check included): a pod whose PodDisruptionBudget never
// allows its eviction holds the drain. The Machine names the pod and its budget while the
// drain runs (long before the drain's deadline; the operator's stall Event and condition read
// it, operator-drain-stall.test.ts); a retarget during the drain stops it, undoes liken's
// cordon and says so (a DrainStopped Event on the Node); so does a revert to the release the
// machine runs, and cluster-operator takes the abandoned turn back.
import { CoreV1Api } from "@kubernetes/client-node";
import { beforeAll, describe, expect, it } from "vitest";
import type { Machine, ReleaseRef } from "../../src/api/types.js";
import { nodeEvents, podsOf } from "../support/drain-helpers.js";
import { kubeConfig, waitFor } from "../support/kube.js";
import { heldDrain } from "./held-drain.js";

const HELD = `held-${Date.now().toString(36)}`;
/**
 * The drain's own deadline: far beyond every wait below, so what the test sees comes while
 * the drain runs, never from its end.
 */
const DRAIN_MS = 600_000;
/** How soon the blocker must show: a few eviction retries (1 s doubling to 5 s) and a write. */
const BLOCKER_SHOWS_MS = 30_000;

describe("a drain held by a PodDisruptionBudget: shown while it runs, stopped by a new target", () => {
  const { fleet, ns } = heldDrain({
    versions: ["2026.10.10-001", "2026.10.12-001", "2026.10.14-001"],
    held: HELD,
    drainMs: DRAIN_MS,
    namespace: "held",
    runs: "the machine runs the first release",
  });
  const core = kubeConfig().makeApiClient(CoreV1Api);
  let v1: ReleaseRef, v2: ReleaseRef, v3: ReleaseRef;
  beforeAll(() => {
    [v1, v2, v3] = fleet.releases as [ReleaseRef, ReleaseRef, ReleaseRef];
  });

  const machine = (): Promise<Machine> => fleet.api.machines.get(HELD);
  const cordoned = async (): Promise<boolean> =>
    (await core.readNode({ name: HELD })).spec?.unschedulable ?? false;

  /** Draining for `r`, and the status names the pod and its budget. */
  async function blockerShown(r: ReleaseRef): Promise<void> {
    await waitFor(
      `${HELD} drains for ${r.version}`,
      async () => {
        const s = (await machine()).status;
        return s?.updateStage === "Draining" && s.turnRequest?.version === r.version;
      },
      { timeoutMs: 120_000, intervalMs: 300 },
    );
    const s = await waitFor(
      `${HELD}'s status names the blocker while it drains`,
      async () => {
        const st = (await machine()).status;
        return st?.drainBlocker !== undefined && st.updateStage === "Draining" ? st : undefined;
      },
      { timeoutMs: BLOCKER_SHOWS_MS, intervalMs: 300 },
    );
    expect(s.drainBlocker).toMatchObject({
      pod: expect.stringMatching(new RegExp(`^${ns()}/db-`)) as unknown,
      podDisruptionBudget: `${ns()}/db`,
    });
    expect(s.conditions?.find((c) => c.type === "DrainBlocked")).toMatchObject({
      status: "True",
      reason: "EvictionRefused",
    });
    expect(await cordoned()).toBe(true);
  }

  /**
   * The drain for `from` stopped: a DrainStopped Event saying `why`, liken's cordon undone, and
   * the status no longer drains for `from` nor names its blocker. The machine may already be on
   * its way to the new target (staged, a turn, a new drain that cordons again: the retarget
   * case), so what is checked is the stopped drain's, not "not draining at all".
   */
  async function stoppedSaying(why: string, from: ReleaseRef): Promise<void> {
    const event = await waitFor(
      `a DrainStopped Event on ${HELD} saying "${why}"`,
      async () => (await nodeEvents(HELD, "DrainStopped")).find((e) => e.message?.includes(why)),
      { timeoutMs: 30_000, intervalMs: 300 },
    );
    expect(event.message).toContain("liken's cordon is undone and the node takes pods again");
    const drainsFrom = (m: Machine): boolean =>
      m.status?.updateStage === "Draining" && m.status.turnRequest?.version === from.version;
    await waitFor(
      `${HELD} no longer drains for ${from.version} nor shows its blocker`,
      async () => {
        const m = await machine();
        if (drainsFrom(m)) return undefined;
        // A blocker may only be the new target's drain's.
        return m.status?.drainBlocker === undefined || m.status.updateStage === "Draining"
          ? m
          : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 300 },
    );
    // The Event's words are written after the uncordon; the revert case checks the node itself
    // once the machine is Ready (a retarget's new drain cordons again at any moment).
    // The held pod was never evicted: the budget held it, and nothing evicts it now.
    const pods = (await podsOf(ns(), "db")).filter((p) => p.spec?.nodeName === HELD);
    expect(pods.filter((p) => p.metadata?.deletionTimestamp == null)).toHaveLength(1);
  }

  it("names the blocker while draining; a retarget stops the drain and uncordons", async () => {
    await fleet.setTarget(v2);
    await blockerShown(v2);
    await fleet.setTarget(v3);
    await stoppedSaying(`the target changed from ${v2.version} to ${v3.version}`, v2);
    // The new target goes its own way: staged, a turn, a drain that shows its blocker again.
    await blockerShown(v3);
  }, 300_000);

  it("a revert to the running release stops the drain, uncordons, and the machine reads Ready", async () => {
    await fleet.setTarget(v1);
    await stoppedSaying(
      `the target went back from ${v3.version} to ${v1.version}, which this machine runs`,
      v3,
    );
    await fleet.waitAll(
      "the machine serves on its release",
      (m) => m.status?.step === "Ready" && m.status.version === v1.version,
    );
    expect(await cordoned()).toBe(false);
    // cluster-operator took the turn of the abandoned release back; the rollout is complete.
    await waitFor(
      "the Cluster reads Ready with no turn",
      async () => {
        const c = await fleet.api.clusters.get(fleet.cluster);
        return c.status?.phase === "Ready" && (c.status.rebootTurns ?? []).length === 0;
      },
      { timeoutMs: 30_000, intervalMs: 300 },
    );
  }, 120_000);
});
