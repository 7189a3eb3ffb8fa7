// Issue 48, defect 7 on the real control plane: a revert asked for after a recall, on a Cluster
// that never read the recalled release as vouched. The fleet promoted V1 then V2 in pinned
// mode; the signed channel recalls V2; the Cluster switches to mode channel, so its trust status
// begins after the recall and takes nothing (no target, nothing taken: the decision has nothing
// chosen). The machine still runs V2. `liken rollout revert` (the real CLI) names V2 from what
// the Machine runs, cluster-operator (in this process) records the revert V2 -> V1, and the
// machine that staged V1 gets its turn. Without the fix the CLI refused ("chose no release")
// and a request written by hand was dropped with only Progressing NoTarget.
import { execFile } from "node:child_process";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Cluster, MachineStatus } from "../../src/api/types.js";
import type { Logger } from "../../src/operator/logger.js";
import { Operator } from "../../src/operator/run/operator.js";
import { recallRelease } from "../../src/release/tuf.js";
import { kubeConfig, kubeconfigPath, uniqueName, waitFor } from "../support/kube.js";
import { testChannel, type TestChannel } from "../support/tuf-channel.js";
import {
  Heartbeats,
  api,
  createMachine,
  deleteAll,
  ensureNamespaces,
  now,
  writeStatus,
} from "./operator-fleet.js";

const run = promisify(execFile);
const LIKEN = path.resolve(import.meta.dirname, "../../bin/liken.js");
const V1 = "2026.11.01-001";
const V2 = "2026.11.02-001";

const quiet: Logger = { info: () => undefined, warn: () => undefined, error: () => undefined };
const op = new Operator(kubeConfig(), {
  identity: uniqueName("op-recalled"),
  startGraceSeconds: 1,
  leaderElection: false,
  // A read of the channel every second: the test waits on a few of them.
  channelIntervalMs: 1000,
  log: quiet,
  clocks: { wall: () => Date.now(), mono: () => performance.now() },
});

let ch: TestChannel;
beforeAll(async () => {
  await ensureNamespaces();
  ch = await testChannel();
  await op.start();
}, 60_000);
afterAll(async () => {
  await op.stop();
  await ch?.close();
}, 30_000);

async function liken(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    return { code: 0, ...(await run(LIKEN, [...args, "--kubeconfig", kubeconfigPath()])) };
  } catch (e) {
    const x = e as { code?: number; stdout?: string; stderr?: string };
    return { code: x.code ?? 1, stdout: x.stdout ?? "", stderr: x.stderr ?? "" };
  }
}

async function until(name: string, what: string, ok: (c: Cluster) => boolean): Promise<Cluster> {
  return waitFor(
    `${name}: ${what}`,
    async () => {
      const c = await api.clusters.get(name);
      return ok(c) ? c : undefined;
    },
    { timeoutMs: 30_000, intervalMs: 200 },
  );
}
const cond = (c: Cluster, type: string) => c.status?.conditions?.find((x) => x.type === type);

describe("a revert of a recalled release the Cluster never took", () => {
  it("`liken rollout revert` names it from the Machines, and the operator reverts it", async () => {
    const d1 = await ch.publish(V1);
    const d2 = await ch.publish(V2);
    const r1 = { version: V1, digest: d1 };
    const r2 = { version: V2, digest: d2 };
    const cluster = uniqueName("recalled");
    const machine = uniqueName("r");
    await api.clusters.create({
      apiVersion: "liken.sh/v1alpha1",
      kind: "Cluster",
      metadata: { name: cluster },
      spec: {
        version: V1,
        releases: { source: `${ch.source}/`, catalog: [r1, r2] },
        disruption: { maxUnavailable: 1 },
      },
    });
    await createMachine(cluster, { name: machine, policy: "Auto" });
    const beats = new Heartbeats(cluster, [machine], 400);
    await beats.start();
    try {
      // Pinned mode: the fleet proves V1, then V2 (what the agent reports after each turn).
      await writeStatus(machine, { ...r1, step: "Ready" });
      await until(cluster, `lastKnownGood ${V1}`, (c) => c.status?.lastKnownGood?.version === V1);
      await api.clusters.patch(cluster, { spec: { version: V2 } });
      await writeStatus(machine, { ...r2, step: "Ready" });
      await until(cluster, `lastKnownGood ${V2}`, (c) => c.status?.lastKnownGood?.version === V2);

      // The channel recalls V2; then the Cluster switches to mode channel.
      await recallRelease({
        repo: ch.repo,
        keys: ch.keys,
        channel: "stable",
        version: V2,
        reason: "NIC drops",
      });
      const trust = { mode: "channel" as const, channel: "stable", rootDigest: ch.rootDigest };
      await api.clusters.patch(cluster, { spec: { releases: { trust } } });
      const held = await until(
        cluster,
        "ChannelTrusted False ReleaseRecalled, nothing taken",
        (c) => cond(c, "ChannelTrusted")?.reason === "ReleaseRecalled",
      );
      expect(held.status?.trust?.taken).toBeUndefined();
      expect(held.status?.trust?.target).toBeUndefined();
      expect(cond(held, "Progressing")?.reason).toBe("NoTarget");

      const r = await liken(["rollout", "revert", cluster, "--reason", "recalled: NIC drops"]);
      expect(r.stderr).toBe("");
      expect(r.stdout).toContain(`asked cluster-operator to revert ${V2} to ${V1}`);
      const c = await until(cluster, "the revert recorded", (x) => x.status?.revert !== undefined);
      expect(c.status?.revert).toMatchObject({ from: r2, to: r1, trigger: "Request" });
      expect(cond(c, "Reverted")).toMatchObject({ status: "True", reason: "RevertedByRequest" });

      // The machine staged V1 in its other slot and asks: the revert grants its turn.
      const at = now();
      const asks: MachineStatus = {
        ...r2,
        step: "UpdatePending",
        target: r1,
        staged: { ...r1, slot: "a", at },
        turnRequest: { ...r1, at },
      };
      await writeStatus(machine, asks);
      await until(cluster, `a turn for ${machine} to ${V1}`, (x) =>
        (x.status?.rebootTurns ?? []).some((t) => t.machine === machine && t.version === V1),
      );
    } finally {
      beats.stop();
      await deleteAll(cluster, [machine]);
    }
  }, 180_000);
});
