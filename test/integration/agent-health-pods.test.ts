// The pods gate against the real API server (health-run.ts over the lean REST client): the list
// by namespace, label selector (matchLabels and set-based) and this node's name, and the verdict
// on what comes back. kwok makes every pod Running and Ready (it ignores readiness gates), so a
// pod that is not Ready is the unit table's business (test/unit/agent-health.test.ts).
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Rest, loadRestConfig } from "../../src/api/rest.js";
import type { Cluster, HealthPods } from "../../src/api/types.js";
import { HealthGates } from "../../src/agent/health-run.js";
import { kubeconfigPath, uniqueName } from "../support/kube.js";
import { dropKwokPods, kwokPods } from "../support/kwok-pods.js";

const NODE = uniqueName("hp-node");
const OTHER = uniqueName("hp-other");
const NS = uniqueName("hp");

const clusterWith = (pods: HealthPods[]): Cluster => ({
  apiVersion: "liken.sh/v1alpha1",
  kind: "Cluster",
  metadata: { name: "c" },
  spec: { releases: { source: "http://127.0.0.1:1" }, health: { pods } },
});

describe("the pods gate on the real API server", () => {
  let bootStartedAt = Date.now() - 60_000;
  const gates = new HealthGates({
    commands: [],
    nodeName: NODE,
    rest: new Rest(loadRestConfig(kubeconfigPath()), "health-pods-test"),
    log: pino({ level: "silent" }),
    now: () => Date.now(),
    // This "boot" started before the pods were made Ready (kwok stamps their Ready now), unless
    // a test moves it past them.
    bootStartedAt: () => bootStartedAt,
  });
  const verdict = async (pods: HealthPods[]) => {
    const c = clusterWith(pods);
    await gates.check(c);
    return gates.seen(c).last?.failed;
  };

  beforeAll(async () => {
    await kwokPods(
      NS,
      [NODE, OTHER],
      [
        { name: "cni-1", node: NODE, labels: { app: "cni" } },
        { name: "cni-2", node: OTHER, labels: { app: "cni" } },
        { name: "csi-1", node: OTHER, labels: { app: "csi" } },
        { name: "agent-1", node: NODE, labels: { app: "agent", tier: "node" } },
      ],
    );
  }, 120_000);
  afterAll(async () => {
    await dropKwokPods(NS, [NODE, OTHER]);
  });

  it("passes when the selected pods on this node are Ready", async () => {
    expect(
      await verdict([{ namespace: NS, selector: { matchLabels: { app: "cni" } } }]),
    ).toBeUndefined();
  });

  it("fails when no pod matches on this node (one on another node does not count)", async () => {
    expect(await verdict([{ namespace: NS, selector: { matchLabels: { app: "csi" } } }])).toEqual({
      gate: `pods ${NS}/app=csi`,
      output: `no pod matches on node ${NODE}`,
    });
  });

  it("takes set-based selectors as the API server does", async () => {
    const sel = (matchExpressions: NonNullable<HealthPods["selector"]["matchExpressions"]>) => [
      { namespace: NS, selector: { matchExpressions } },
    ];
    expect(
      await verdict(sel([{ key: "app", operator: "In", values: ["agent", "x"] }])),
    ).toBeUndefined();
    expect(
      await verdict(
        sel([
          { key: "tier", operator: "Exists" },
          { key: "app", operator: "NotIn", values: ["cni"] },
        ]),
      ),
    ).toBeUndefined();
    expect(await verdict(sel([{ key: "app", operator: "In", values: ["csi"] }]))).toEqual({
      gate: `pods ${NS}/app in (csi)`,
      output: `no pod matches on node ${NODE}`,
    });
    // cni-1 carries no tier label, and it is Ready.
    expect(await verdict(sel([{ key: "tier", operator: "DoesNotExist" }]))).toBeUndefined();
  });

  it("fails when the pods are Ready since before this boot (the last boot's Ready)", async () => {
    const before = bootStartedAt;
    bootStartedAt = Date.now() + 60_000;
    try {
      const got = await verdict([{ namespace: NS, selector: { matchLabels: { app: "cni" } } }]);
      expect(got?.output).toMatch(
        /^1 of 1 pod\(s\) not Ready since this boot: cni-1 \(Running, Ready since \S+, before this boot\)$/,
      );
    } finally {
      bootStartedAt = before;
    }
  });
});
