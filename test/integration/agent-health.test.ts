// Health gates before promotion and the failure brake's first trial, with the real
// cluster-operator and the real agents (simulated machines: the real `liken agent run`,
// file-backed slots, the firmware model), on a budget of three machines at once:
//   - the Cluster's spec.health.pods selects a DaemonSet's pods (kwok makes them Ready on each
//     node) and every agent has a host check (agent.yaml health.commands) that fails until a
//     file exists: exactly one machine tries the release (the budget allows three, but no
//     machine proved it yet), its trial boot rejoins, the pods gate passes, the host check
//     does not; at the prove deadline it reboots without promoting, the firmware boots the old
//     slot, and it reports HealthCheckFailed naming the gate and its output; the Cluster reads
//     ReleaseFailed and the other two keep the release staged;
//   - with the check fixed and `liken rollout resume --failed-release`, one more machine tries
//     it alone, passes every gate and is promoted; the release is proven and the last machine
//     follows;
//   - after promotion, with spec.rollout.revert set, the host check breaks: the agents run the
//     gates again, report status.postPromotionHealth Failed naming the gate and this boot, and
//     the operator's automatic revert trips on them, naming the gate (this fleet has no last
//     known good, so it says so: operator-revert.test.ts shows the revert itself).
import { execFile } from "node:child_process";
import { rm, writeFile } from "node:fs/promises";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Cluster, Machine, ReleaseRef } from "../../src/api/types.js";
import { kubectl, mintClientCert, waitFor } from "../support/kube.js";
import { Fleet } from "./agent-harness.js";
import { runFirstRelease } from "./fleet-steps.js";

const run = promisify(execFile);
const LIKEN = path.resolve(import.meta.dirname, "../../bin/liken.js");
const suffix = Date.now().toString(36);
const NAMES = [`hw1-${suffix}`, `hw2-${suffix}`, `hw3-${suffix}`];
const NS = `health-${suffix}`;
const APP = "node-agent";

const progressing = (c: Cluster) => c.status?.conditions?.find((x) => x.type === "Progressing");

/** A DaemonSet on exactly this test's nodes: the pods the Cluster's pods gate selects. */
function daemonSet(): string {
  return JSON.stringify({
    apiVersion: "apps/v1",
    kind: "DaemonSet",
    metadata: { name: APP, namespace: NS },
    spec: {
      selector: { matchLabels: { app: APP } },
      template: {
        metadata: { labels: { app: APP } },
        spec: {
          terminationGracePeriodSeconds: 1,
          tolerations: [{ operator: "Exists" }],
          affinity: {
            nodeAffinity: {
              requiredDuringSchedulingIgnoredDuringExecution: {
                // One term per node: a field selector takes one value (the terms are ORed).
                nodeSelectorTerms: NAMES.map((n) => ({
                  matchFields: [{ key: "metadata.name", operator: "In", values: [n] }],
                })),
              },
            },
          },
          containers: [{ name: "main", image: `registry.example/${APP}:1` }],
        },
      },
    },
  });
}

describe("health gates and the first trial, with the real operator and agents", () => {
  const fleet = new Fleet();
  let v1: ReleaseRef, v2: ReleaseRef;
  let alice: string;
  const flag = (name: string) => path.join(fleet.dir, `${name}.healthy`);

  const cluster = () => fleet.api.clusters.get(fleet.cluster);
  const machines = async (): Promise<Machine[]> =>
    Promise.all(NAMES.map((n) => fleet.api.machines.get(n)));
  const trials = (name: string) => fleet.machines.get(name)!.boots.filter((b) => b.trial).length;
  /** The most turns the Cluster held at once, from every version of it the watch saw. */
  const maxTurns = () =>
    Math.max(0, ...fleet.history.filter((h) => h.kind === "Cluster").map((h) => h.turns!.length));
  const reasonsSeen = () =>
    new Set(
      fleet.history.flatMap((h) =>
        h.kind === "Cluster" ? [progressing(h.object as Cluster)?.reason ?? ""] : [],
      ),
    );

  beforeAll(async () => {
    alice = mintClientCert({ user: "alice", groups: ["system:masters"] }).kubeconfig;
    await fleet.start(["2026.10.10-001", "2026.10.12-001"], {
      disruption: { maxUnavailable: 3 },
      health: { pods: [{ namespace: NS, selector: { matchLabels: { app: APP } } }] },
    });
    [v1, v2] = fleet.releases as [ReleaseRef, ReleaseRef];
    for (const name of NAMES) {
      await fleet.addMachine({
        name,
        role: "Worker",
        rebootPolicy: "Auto",
        healthCommands: [
          {
            name: "etcd",
            command: [
              "sh",
              "-c",
              `test -e ${flag(name)} || { echo "etcd: member ${name} unhealthy" >&2; exit 3; }`,
            ],
            timeoutSeconds: 5,
          },
        ],
      });
    }
    expect((await kubectl(["create", "namespace", NS])).code).toBe(0);
    const applied = await kubectl(["apply", "-f", "-"], { input: daemonSet() });
    expect(applied.code, applied.stderr).toBe(0);
    await waitFor(
      "the DaemonSet's pods Ready on the three nodes",
      async () => {
        const r = await kubectl(["get", "pods", "-n", NS, "-o", "json"]);
        const pods = (
          JSON.parse(r.stdout) as {
            items: {
              spec: { nodeName?: string };
              status: { conditions?: { type: string; status: string }[] };
            }[];
          }
        ).items;
        const ready = pods.filter((p) =>
          p.status.conditions?.some((c) => c.type === "Ready" && c.status === "True"),
        );
        return ready.length === 3 && new Set(ready.map((p) => p.spec.nodeName)).size === 3;
      },
      { timeoutMs: 120_000, intervalMs: 500 },
    );
    await runFirstRelease(fleet, "every machine runs the first release");
  }, 300_000);
  afterAll(async () => {
    await fleet.stop();
    await kubectl(["delete", "namespace", NS, "--wait=false"]);
  }, 60_000);

  it("a host check that fails: one machine tries the release, falls back, reports HealthCheckFailed, and the brake holds", async () => {
    await fleet.setTarget(v2);
    const held = await waitFor(
      "ReleaseFailed while the other two keep the release staged",
      async () => {
        const [c, ms] = await Promise.all([cluster(), machines()]);
        const staged = ms.filter(
          (m) => m.status?.step === "UpdatePending" && m.status.staged?.version === v2.version,
        );
        return progressing(c)?.reason === "ReleaseFailed" && staged.length === 2
          ? { c, ms }
          : undefined;
      },
      { timeoutMs: 300_000, intervalMs: 500 },
    );
    const failed = held.ms.find((m) => m.status?.step === "Failed")!;
    const first = failed.metadata.name;

    // A budget of three, yet exactly one machine tried it: no machine had proven it.
    expect(NAMES.map(trials).sort()).toEqual([0, 0, 1]);
    expect(maxTurns()).toBe(1);
    expect(reasonsSeen()).toContain("AwaitingFirstTrial");

    // Its trial boot rejoined; the pods gate passed (the host check runs after it) and the
    // host check did not: it rebooted without promoting, and the firmware booted slot a.
    const s = failed.status!;
    expect(s.version).toBe(v1.version);
    expect(s.bootedSlot).toBe("a");
    expect(
      fleet.machines.get(first)!.boots.map((b) => `${b.slot}:${b.trial}:${b.outcome}`),
    ).toEqual(["a:false:up", "b:true:up", "a:false:up"]);
    expect(s.lastTrial).toMatchObject({
      ...v2,
      slot: "b",
      result: "Failed",
      reason: "HealthCheckFailed",
    });
    expect(s.lastTrial?.message).toContain("health gate command etcd did not pass within 8000 ms");
    expect(s.lastTrial?.message).toContain(`exited with 3: etcd: member ${first} unhealthy`);
    expect(s.failedReleases).toEqual([
      expect.objectContaining({ ...v2, reason: "HealthCheckFailed" }),
    ]);
    expect(s.conditions?.find((c) => c.type === "TrialSucceeded")).toMatchObject({
      status: "False",
      reason: "HealthCheckFailed",
    });

    // The brake counts it: ReleaseFailed names the machine and the reason; no turn is held.
    const p = progressing(held.c)!;
    expect(p.status).toBe("False");
    expect(p.message).toContain(`${first} (HealthCheckFailed: `);
    expect(held.c.status?.rebootTurns ?? []).toEqual([]);
    expect((await kubectl(["get", "cluster", fleet.cluster])).stdout).toMatch(/\bReleaseFailed\b/);
  }, 400_000);

  it("with the check fixed and the failure accepted, one more tries it alone, passes every gate, and the last one follows", async () => {
    for (const name of NAMES) await writeFile(flag(name), "");
    const before = (await machines()).find((m) => m.status?.step === "Failed")!.metadata.name;
    const resumed = await run(LIKEN, [
      "rollout",
      "resume",
      fleet.cluster,
      "--failed-release",
      "--kubeconfig",
      alice,
    ]);
    expect(resumed.stdout).toContain(
      `accepted the failed trials of ${v2.version} as alice: ${before}`,
    );
    const rest = NAMES.filter((n) => n !== before);
    await waitFor(
      "the two others on the release, promoted",
      async () => {
        const ms = await Promise.all(rest.map((n) => fleet.api.machines.get(n)));
        return ms.every((m) => m.status?.version === v2.version && m.status.step === "Ready");
      },
      { timeoutMs: 300_000, intervalMs: 500 },
    );
    for (const n of rest) {
      const s = (await fleet.api.machines.get(n)).status!;
      expect(s.lastTrial).toMatchObject({ ...v2, result: "Succeeded", reason: "Promoted" });
      expect(trials(n)).toBe(1);
    }
    // Still one at a time: the second tried it alone; once it was promoted the third went.
    expect(maxTurns()).toBe(1);
  }, 400_000);

  it("after promotion the gates run again: the host check breaks later, the agents report it naming this boot, and the automatic revert trips on them naming the gate", async () => {
    const onV2 = (await machines()).filter((m) => m.status?.version === v2.version);
    expect(onV2.length).toBe(2);
    // "An hour later" the host check breaks on the machines that run the release.
    for (const m of onV2) await rm(flag(m.metadata.name), { force: true });
    // Two post-promotion failures trip it (the first machine's failed trial was accepted).
    await fleet.api.clusters.patch(fleet.cluster, {
      spec: { rollout: { revert: { maxFailures: 2, watchSeconds: 3600 } } },
    });
    const reported = await waitFor(
      "every machine on the release reports its failed gates",
      async () => {
        const ms = await Promise.all(onV2.map((m) => fleet.api.machines.get(m.metadata.name)));
        return ms.every((m) => m.status?.postPromotionHealth?.result === "Failed") ? ms : undefined;
      },
      { timeoutMs: 120_000, intervalMs: 500 },
    );
    for (const m of reported) {
      const h = m.status!.postPromotionHealth!;
      expect(h).toMatchObject({ ...v2, result: "Failed", gate: "command etcd" });
      expect(h.message).toContain("unhealthy");
      // Fresh evidence: the boot named is the one its Node shows now.
      const node = await kubectl([
        "get",
        "node",
        m.metadata.name,
        "-o",
        "jsonpath={.status.nodeInfo.bootID}",
      ]);
      expect(h.bootID).toBe(node.stdout.trim());
    }
    // The threshold trips on the post-promotion failures and names the gate. This fleet's
    // first release was installed, never promoted through a rollout, so there is no last known
    // good to go back to: the Reverted condition says so instead of acting (NoKnownGood).
    const why = await waitFor(
      "the automatic revert's threshold on post-promotion health",
      async () => {
        const x = await cluster();
        const r = x.status?.conditions?.find((k) => k.type === "Reverted");
        if (r?.message.includes("PostPromotionHealthFailed") === true) return r;
        throw new Error(
          JSON.stringify(x.status?.conditions?.map((k) => [k.type, k.reason, k.message])),
        );
      },
      { timeoutMs: 60_000, intervalMs: 500 },
    );
    expect(why.message).toContain(
      `that took ${v2.version} failed (spec.rollout.revert.maxFailures 2)`,
    );
    for (const m of onV2) {
      expect(why.message).toContain(
        `${m.metadata.name} (PostPromotionHealthFailed gate command etcd`,
      );
    }
  }, 300_000);
});
