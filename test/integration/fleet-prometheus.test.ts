// The fleet page and the per-cluster alerts on a real Prometheus scraping TWO operators, each
// on its own real control plane with its own Cluster (the test's leased control plane and a
// second one started here), as a Prometheus that federates or receives many clusters sees
// them. Then:
//   - every query of the dashboard's "Fleet of clusters" page returns a row for each cluster;
//   - LikenMachinesLost fires for the cluster whose machine is silent, and never for the other;
//   - the metrics that name no Cluster carry the operator's --metrics-cluster.
// The rules are the shipped ones; only each `for` is cut to 3 s (as prometheus.test.ts does).
import { spawn, type ChildProcess } from "node:child_process";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { needsTool } from "../support/tool-build.js";
import { LABEL_RING, LikenApi, loadKubeConfig, type Cluster } from "../../src/api/index.js";
import { likenEntry } from "../../src/cli/entry.js";
import { freePort } from "../../src/controlplane/ports.js";
import { REPO_ROOT } from "../../src/controlplane/paths.js";
import { dashboardQueries, ruleGroups, rulesFile } from "../../src/deploy/monitoring.js";
import { applyManifests } from "../support/apply.js";
import { clusterObject } from "../support/clusters.js";
import { upOwned, type OwnedControlPlane } from "../support/controlplane-owned.js";
import { kubeconfigPath, uniqueName, waitFor } from "../support/kube.js";
import { PrometheusServer, type PromAlert } from "../support/prometheus.js";

const SHORT_FOR = "3s";
const FLEET_PANELS = ["Clusters", "Clusters by ring and release", "Firing alerts by cluster"];

describe("the fleet page and per-cluster alerts over two operators", () => {
  const suffix = uniqueName("fleet");
  const EAST = `${suffix}-east`;
  const WEST = `${suffix}-west`;
  let second: OwnedControlPlane | undefined;
  let prom: PrometheusServer | undefined;
  const operators: ChildProcess[] = [];
  const seen: PromAlert[] = [];
  let alertPoll: NodeJS.Timeout | undefined;
  const cleanup: (() => Promise<unknown>)[] = [];

  function cluster(name: string, ring: string): Cluster {
    const c = clusterObject(name);
    c.metadata.labels = { [LABEL_RING]: ring };
    return c;
  }

  async function operator(kubeconfig: string, name: string): Promise<string> {
    const port = await freePort();
    const child = spawn(
      process.execPath,
      [
        likenEntry(),
        "operator",
        "--kubeconfig",
        kubeconfig,
        "--identity",
        `fleet-prometheus-${name}`,
        "--no-leader-elect",
        "--start-grace",
        "1s",
        "--lost-after",
        "5s",
        "--metrics-address",
        `127.0.0.1:${port}`,
        "--metrics-cluster",
        name,
      ],
      { stdio: ["ignore", "ignore", "ignore"] },
    );
    operators.push(child);
    return `127.0.0.1:${port}`;
  }

  needsTool("prometheus");
  beforeAll(async () => {
    second = await upOwned(`fleet-prom-${process.pid}-${suffix}`, () => undefined);
    await applyManifests(second.state, path.join(REPO_ROOT, "config", "crd"));
    const east = new LikenApi(loadKubeConfig(kubeconfigPath()));
    const west = new LikenApi(loadKubeConfig(second.state.kubeconfig));
    await east.clusters.create(cluster(EAST, "canary"));
    cleanup.push(() => east.clusters.delete(EAST));
    // WEST has no machine: nothing of it is Lost, while EAST's machine never reports.
    await west.clusters.create(cluster(WEST, "broad"));
    // A machine of EAST whose agent never reports: Lost after --lost-after.
    await east.machines.create({
      apiVersion: "liken.sh/v1alpha1",
      kind: "Machine",
      metadata: { name: `${EAST}-m1` },
      spec: { cluster: EAST, nodeName: `${EAST}-m1` },
    });
    cleanup.push(() => east.machines.delete(`${EAST}-m1`));
    const targets = [
      await operator(kubeconfigPath(), EAST),
      await operator(second.state.kubeconfig, WEST),
    ];
    const groups = ruleGroups().map((g) => ({
      ...g,
      rules: g.rules.map((r) => (r.for === undefined ? r : { ...r, for: SHORT_FOR })),
    }));
    prom = await PrometheusServer.start({
      rules: rulesFile(groups),
      staticTargets: { "cluster-operator": targets },
      fileJobs: [],
    });
    const p = prom;
    alertPoll = setInterval(() => {
      p.alerts().then(
        (as) => seen.push(...as),
        () => undefined,
      );
    }, 250);
    await waitFor(
      "Prometheus scrapes both operators",
      async () => (await p.targets()).filter((t) => t.health === "up").length === 2,
      { timeoutMs: 60_000, intervalMs: 500 },
    );
  }, 300_000);

  afterAll(async () => {
    clearInterval(alertPoll);
    await prom?.stop();
    for (const o of operators) {
      if (o.exitCode === null && o.signalCode === null) {
        const gone = new Promise((r) => o.once("exit", r));
        o.kill("SIGTERM");
        await gone;
      }
    }
    for (const c of cleanup.reverse()) await c().catch(() => undefined);
    await second?.stop();
  }, 120_000);

  const fired = (alert: string, cluster: string): boolean =>
    seen.some(
      (a) => a.labels.alertname === alert && a.labels.cluster === cluster && a.state === "firing",
    );

  it("fires LikenMachinesLost for the silent cluster only, and every fleet query has a row per cluster", async () => {
    const p = prom!;
    await waitFor(
      "LikenMachinesLost fires for EAST",
      async () => fired("LikenMachinesLost", EAST),
      {
        timeoutMs: 120_000,
        intervalMs: 250,
      },
    );
    // Nothing of WEST is Lost: an alert for it would be EAST's trouble told as WEST's. (EAST's
    // operator shares its control plane with the other integration files, whose Clusters it
    // reports too: only WEST's silence is this test's to judge.)
    expect(
      seen.filter((a) => a.labels.alertname === "LikenMachinesLost" && a.labels.cluster === WEST),
    ).toEqual([]);

    const queries = dashboardQueries().filter((q) => FLEET_PANELS.includes(q.panel));
    expect(new Set(queries.map((q) => q.panel))).toEqual(new Set(FLEET_PANELS));
    const problems: string[] = [];
    const now = Date.now() / 1000;
    for (const q of queries) {
      const series = await p.queryRange(q.expr, now - 30, now);
      const clusters = new Set(series.map((s) => s.metric.cluster));
      const rings = new Set(series.map((s) => s.metric.ring));
      const what = `${q.panel} (${q.refId}): ${q.expr}`;
      if (q.panel === "Clusters by ring and release") {
        if (!rings.has("canary") || !rings.has("broad"))
          problems.push(`${what}: rings ${[...rings].join(",")}`);
      } else if (q.panel === "Firing alerts by cluster") {
        const lost = series.filter(
          (s) =>
            s.metric.alertname === "LikenMachinesLost" &&
            (s.metric.cluster === EAST || s.metric.cluster === WEST),
        );
        if (lost.map((s) => s.metric.cluster).join(",") !== EAST)
          problems.push(
            `${what}: LikenMachinesLost for ${lost.map((s) => s.metric.cluster).join(",")}`,
          );
      } else if (!clusters.has(EAST) || !clusters.has(WEST)) {
        problems.push(`${what}: clusters ${[...clusters].join(",")}`);
      }
    }
    expect(problems, problems.join("\n")).toEqual([]);

    // The info series names each cluster's ring, and the metrics that name no Cluster carry
    // the operator's --metrics-cluster.
    const info = await p.queryRange(
      "max by (cluster, ring) (liken_operator_cluster_info)",
      now - 30,
      now,
    );
    expect(info.map((s) => `${s.metric.cluster}=${s.metric.ring}`).sort()).toEqual(
      [`${EAST}=canary`, `${WEST}=broad`].sort(),
    );
    const leading = await p.queryRange("liken_operator_leading", now - 30, now);
    expect(leading.map((s) => s.metric.cluster).sort()).toEqual([EAST, WEST].sort());
    const cpu = await p.queryRange("process_cpu_seconds_total", now - 30, now);
    expect(cpu.map((s) => s.metric.cluster).sort()).toEqual([EAST, WEST].sort());
  }, 300_000);
});
