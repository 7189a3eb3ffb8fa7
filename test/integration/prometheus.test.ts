// liken's alerts and dashboard against a real Prometheus (the pinned server, built like
// promtool): it scrapes the real operator and the real agents of the integration fleet over
// loopback while a rollout runs in which one machine's trial fails and another machine, once
// granted its turn, never comes back. Then:
//   - LikenReleaseFailed goes pending, then firing, for this cluster;
//   - LikenRolloutStalled fires once the operator stalls the rollout on the lost machine;
//   - every query of every dashboard panel returned series during the rollout.
// The rules are the shipped ones, expressions unchanged; only each `for` is cut to 3 s so the
// test need not wait the minutes a fleet should (test/promtool/alerts.test.yaml proves the real
// durations). Cold, the setup builds the Prometheus server (about 3 minutes on two cores).
import { readFile } from "node:fs/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { needsTool } from "../support/tool-build.js";
import type { ReleaseRef } from "../../src/api/types.js";
import { freePort } from "../../src/controlplane/ports.js";
import { dashboardQueries, ruleGroups, rulesFile } from "../../src/deploy/monitoring.js";
import { waitFor } from "../support/kube.js";
import { PrometheusServer, type PromAlert } from "../support/prometheus.js";
import { Fleet } from "./agent-harness.js";
import { approveReboot } from "./fleet-steps.js";

/** Every alert's `for` in this test: long enough to be seen pending at a 1 s evaluation. */
const SHORT_FOR = "3s";
/** The operator's turn deadline here: longer than a failed trial's turn (about 15 s). */
const TURN_DEADLINE = "40s";

describe("alerts and dashboard on a real Prometheus", () => {
  const fleet = new Fleet();
  const suffix = Date.now().toString(36);
  const FAILS = `fails-${suffix}`;
  const STALLS = `stalls-${suffix}`;
  let prom: PrometheusServer | undefined;
  let operatorPort = 0;
  let v2: ReleaseRef;
  let agentTargets: NodeJS.Timeout | undefined;
  const seen: { at: number; alert: PromAlert }[] = [];
  let alertPoll: NodeJS.Timeout | undefined;

  /** Each machine's newest metrics address, from its agent.log (a new one every boot). */
  async function agentAddresses(): Promise<string[]> {
    const out: string[] = [];
    for (const m of fleet.machines.values()) {
      const log = await readFile(m.logFile, "utf8").catch(() => "");
      const urls = [...log.matchAll(/"url":"http:\/\/([^/"]+)\/metrics"/g)].map((x) => x[1]!);
      if (urls.length > 0) out.push(urls[urls.length - 1]!);
    }
    return out;
  }

  needsTool("prometheus");
  beforeAll(async () => {
    // Both the failed trial and the stalled turn must happen: the failure brake is off.
    await fleet.start(["2026.10.10-001", "2026.10.12-001"], { rollout: { maxFailedTrials: 0 } });
    v2 = fleet.releases[1]!;
    await fleet.addMachine({ name: FAILS, role: "Worker", rebootPolicy: "Auto" });
    // Manual: it takes its turn when the test approves it, after the failed trial.
    await fleet.addMachine({ name: STALLS, role: "Worker", rebootPolicy: "Manual" });
    operatorPort = await freePort();
    await fleet.startRealOperator([
      "--metrics-address",
      `127.0.0.1:${operatorPort}`,
      "--turn-deadline",
      TURN_DEADLINE,
    ]);
    fleet.powerOnAll();
    await fleet.waitAll(
      "both machines report the first release",
      (m) => m.status?.version === fleet.releases[0]!.version,
    );

    const groups = ruleGroups().map((g) => ({
      ...g,
      rules: g.rules.map((r) => (r.for === undefined ? r : { ...r, for: SHORT_FOR })),
    }));
    prom = await PrometheusServer.start({
      rules: rulesFile(groups),
      staticTargets: { "cluster-operator": [`127.0.0.1:${operatorPort}`] },
      fileJobs: ["liken-agent"],
    });
    const p = prom;
    let last = "";
    agentTargets = setInterval(() => {
      void agentAddresses().then(async (a) => {
        const now = a.sort().join(",");
        if (now === last) return;
        last = now;
        await p.setTargets("liken-agent", a);
      });
    }, 500);
    alertPoll = setInterval(() => {
      p.alerts().then(
        (as) => {
          for (const a of as) seen.push({ at: Date.now(), alert: a });
        },
        () => undefined,
      );
    }, 250);
    await waitFor(
      "Prometheus scrapes the operator and both agents",
      async () => {
        const t = await p.targets();
        const up = t.filter((x) => x.health === "up");
        return (
          up.some((x) => x.job === "cluster-operator") &&
          up.filter((x) => x.job === "liken-agent").length === 2
        );
      },
      { timeoutMs: 30_000, intervalMs: 500 },
    );
  }, 600_000);

  afterAll(async () => {
    clearInterval(agentTargets);
    clearInterval(alertPoll);
    await prom?.stop();
    await fleet.stop();
  }, 120_000);

  const states = (name: string, cluster: string): string[] =>
    seen
      .filter((s) => s.alert.labels.alertname === name && s.alert.labels.cluster === cluster)
      .map((s) => s.alert.state)
      .filter((s, i, all) => i === 0 || all[i - 1] !== s);

  it("fires ReleaseFailed (pending, then firing) and RolloutStalled, and every dashboard query returns series", async () => {
    const p = prom!;
    const start = Date.now() / 1000;
    fleet.machines.get(FAILS)!.faults = { b: "no-network" };
    await fleet.setTarget(v2);

    await waitFor(
      "LikenReleaseFailed fires for the cluster",
      async () => states("LikenReleaseFailed", fleet.cluster).includes("firing"),
      {
        timeoutMs: 120_000,
        intervalMs: 250,
      },
    );
    expect(states("LikenReleaseFailed", fleet.cluster).slice(0, 2)).toEqual(["pending", "firing"]);
    expect((await fleet.api.machines.get(FAILS)).status?.step).toBe("Failed");

    // The second machine staged the release; approve it, and cut its power once it reboots
    // for its trial: the turn is granted and never given back.
    await waitFor(
      "the Manual machine waits for approval",
      async () => (await fleet.api.machines.get(STALLS)).status?.step === "RebootPending",
      { timeoutMs: 120_000, intervalMs: 300 },
    );
    await approveReboot(fleet, STALLS, v2, "prometheus-test");
    await waitFor(
      "the approved machine holds its turn and is updating",
      async () => (await fleet.api.machines.get(STALLS)).status?.step === "Updating",
      { timeoutMs: 60_000, intervalMs: 100 },
    );
    await fleet.machines.get(STALLS)!.stop();

    await waitFor(
      "LikenRolloutStalled fires for the cluster",
      async () => states("LikenRolloutStalled", fleet.cluster).includes("firing"),
      {
        timeoutMs: 120_000,
        intervalMs: 250,
      },
    );
    expect(states("LikenRolloutStalled", fleet.cluster).slice(0, 2)).toEqual(["pending", "firing"]);
    const cluster = await fleet.api.clusters.get(fleet.cluster);
    expect(cluster.status?.conditions?.find((c) => c.type === "Progressing")?.reason).toBe(
      "RolloutStalled",
    );

    const end = Date.now() / 1000;
    const empty: string[] = [];
    for (const q of dashboardQueries()) {
      const series = await p.queryRange(q.expr, start, end);
      if (series.length === 0) empty.push(`${q.panel} (${q.refId}): ${q.expr}`);
    }
    expect(
      empty,
      `panels whose query returned no series; targets: ${JSON.stringify(await p.targets())}`,
    ).toEqual([]);
  }, 600_000);
});
