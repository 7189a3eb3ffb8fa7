// The metrics modules: the address grammar, the operator's counters fed by real decide()
// results, its state gauges read from the view at scrape time, the agent's hooks.
import { describe, expect, it } from "vitest";
import { agentMetrics } from "../../src/agent/metrics.js";
import type { Cluster, Machine } from "../../src/api/index.js";
import { parseMetricsAddress } from "../../src/metrics/serve.js";
import { decide } from "../../src/operator/decide/decide.js";
import { OperatorMetrics } from "../../src/operator/run/metrics.js";
import { parseExposition, total } from "../support/metrics.js";
import {
  SETTINGS,
  asking,
  cluster,
  iso,
  machine,
  observed,
  turn,
  NOW,
  V1,
  V2,
  D2,
  failedTrial,
} from "./operator-fixtures.js";

describe("metrics address", () => {
  it.each([
    [":8080", { port: 8080 }],
    ["0.0.0.0:8080", { host: "0.0.0.0", port: 8080 }],
    ["127.0.0.1:0", { host: "127.0.0.1", port: 0 }],
    ["[::1]:9100", { host: "::1", port: 9100 }],
    ["localhost:9100", { host: "localhost", port: 9100 }],
    ["off", undefined],
    ["", undefined],
  ])("%j", (text, want) => {
    expect(parseMetricsAddress(text)).toEqual(want);
  });

  it.each(["8080", "host", ":99999", "a b:80", "http://x:80"])("refuses %j, saying how", (text) => {
    expect(() => parseMetricsAddress(text)).toThrow(
      expect.objectContaining({
        code: "LIKEN_METRICS_ADDRESS_INVALID",
        message: expect.stringContaining("host:port, :port or off"),
      }),
    );
  });
});

async function samples(m: { registry: { metrics(): Promise<string> } }) {
  return parseExposition(await m.registry.metrics());
}

describe("operator metrics", () => {
  it("counts what a decision granted and released, with the latency from the request", async () => {
    const machines = [asking("m1"), asking("m2", { askedAfter: 5 })];
    // Two grants in one decision: the failure brake's one-trial-at-a-time for an unproven
    // release is off here (maxFailedTrials 0).
    const c0 = cluster({ maxUnavailable: 2 });
    const c = { ...c0, spec: { ...c0.spec, rollout: { maxFailedTrials: 0 } } };
    const d = decide(observed(c, machines), SETTINGS);
    expect(d.grants.map((g) => g.machine)).toEqual(["m1", "m2"]);
    const m = new OperatorMetrics({
      clusters: () => [c],
      machines: () => machines,
      leading: () => true,
    });
    m.decided("lab", d, (n) => machines.find((x) => x.metadata.name === n));
    const s = await samples(m);
    expect(total(s, "liken_operator_turns_granted_total", { cluster: "lab" })).toBe(2);
    expect(total(s, "liken_operator_grant_latency_seconds_count", { cluster: "lab" })).toBe(2);
    // Requested at T0+10 s and T0+15 s, granted at NOW = T0+300 s.
    expect(total(s, "liken_operator_grant_latency_seconds_sum", { cluster: "lab" })).toBe(
      290 + 285,
    );
    expect(
      total(s, "liken_operator_grant_latency_seconds_bucket", { cluster: "lab", le: "300" }),
    ).toBe(2);
    expect(
      total(s, "liken_operator_grant_latency_seconds_bucket", { cluster: "lab", le: "120" }),
    ).toBe(0);
  });

  it("counts a rolled-back turn as a release and a failed trial", async () => {
    const failed = machine("m1", {
      status: {
        step: "Failed",
        lastTrial: failedTrial(),
      },
    });
    const c = cluster({ turns: [turn("m1")] });
    const d = decide(observed(c, [failed]), SETTINGS);
    expect(d.releases.map((r) => r.reason)).toEqual(["RolledBack"]);
    const m = new OperatorMetrics({
      clusters: () => [c],
      machines: () => [failed],
      leading: () => true,
    });
    m.decided("lab", d, () => failed);
    const s = await samples(m);
    expect(
      total(s, "liken_operator_turns_released_total", { cluster: "lab", reason: "RolledBack" }),
    ).toBe(1);
    expect(
      total(s, "liken_operator_failed_trials_total", { cluster: "lab", result: "Failed" }),
    ).toBe(1);
  });

  it("reads turns in flight, machines by step, stalls and leadership when scraped", async () => {
    let clusters: Cluster[] = [cluster({ turns: [turn("m1"), turn("m2")] })];
    let machines: Machine[] = [asking("m1"), asking("m2"), machine("m3")];
    let leading = false;
    const m = new OperatorMetrics({
      clusters: () => clusters,
      machines: () => machines,
      leading: () => leading,
    });
    let s = await samples(m);
    expect(total(s, "liken_operator_turns_in_flight", { cluster: "lab" })).toBe(2);
    expect(total(s, "liken_operator_machines", { cluster: "lab", step: "UpdatePending" })).toBe(2);
    expect(total(s, "liken_operator_machines", { cluster: "lab", step: "Ready" })).toBe(1);
    expect(s.some((x) => x.name === "liken_operator_machines" && x.labels.step === "Lost")).toBe(
      true,
    );
    expect(total(s, "liken_operator_rollout_stalled", { cluster: "lab" })).toBe(0);
    expect(total(s, "liken_operator_leading")).toBe(0);

    const stalled = cluster({
      turns: [],
      status: {
        conditions: [
          {
            type: "Progressing",
            status: "False",
            reason: "RolloutStalled",
            message: "m1 did not return",
            lastTransitionTime: iso(NOW),
          },
        ],
      },
    });
    clusters = [stalled];
    machines = [machine("m1", { status: { step: "Lost" } })];
    leading = true;
    s = await samples(m);
    expect(total(s, "liken_operator_turns_in_flight", { cluster: "lab" })).toBe(0);
    expect(total(s, "liken_operator_machines", { cluster: "lab", step: "UpdatePending" })).toBe(0);
    expect(total(s, "liken_operator_machines", { cluster: "lab", step: "Lost" })).toBe(1);
    expect(total(s, "liken_operator_rollout_stalled", { cluster: "lab" })).toBe(1);
    expect(total(s, "liken_operator_leading")).toBe(1);
  });

  it("reads versions, the turn budget, each turn's grant time and the channel's condition when scraped", async () => {
    const c0 = cluster({ maxUnavailable: "50%", turns: [turn("m1")] });
    const channel = {
      type: "ChannelReachable" as const,
      status: "False" as const,
      reason: "ChannelMalformed" as const,
      message: "not a channel document",
      lastTransitionTime: iso(NOW),
    };
    let clusters: Cluster[] = [{ ...c0, status: { ...c0.status, conditions: [channel] } }];
    const machines: Machine[] = [
      asking("m1"),
      machine("m2", { status: { version: V2 } }),
      machine("m3", { status: { version: V2 } }),
      { ...machine("m4"), status: undefined },
    ];
    const m = new OperatorMetrics({
      clusters: () => clusters,
      machines: () => machines,
      leading: () => true,
    });
    let s = await samples(m);
    const of = (version: string) => ({ cluster: "lab", version });
    expect(total(s, "liken_operator_machine_versions", of(V2))).toBe(2);
    expect(total(s, "liken_operator_machine_versions", of("Unknown"))).toBe(1);
    expect(total(s, "liken_operator_machine_versions", of(V1))).toBe(1);
    expect(total(s, "liken_operator_machine_versions", { cluster: "lab" })).toBe(4);
    // 50 % of 4 machines.
    expect(total(s, "liken_operator_turn_budget", { cluster: "lab" })).toBe(2);
    expect(
      total(s, "liken_operator_turn_granted_timestamp_seconds", { cluster: "lab", machine: "m1" }),
    ).toBe(Date.parse(turn("m1").grantedAt) / 1000);
    expect(
      total(s, "liken_operator_channel_condition", { cluster: "lab", reason: "ChannelMalformed" }),
    ).toBe(1);
    expect(total(s, "liken_operator_channel_condition", { cluster: "lab" })).toBe(1);
    // One info series per Cluster: its ring label (none here) and the release it moves to.
    expect(s.filter((x) => x.name === "liken_operator_cluster_info").map((x) => x.labels)).toEqual([
      { cluster: "lab", ring: "", version: V2 },
    ]);
    clusters = [
      {
        ...clusters[0]!,
        metadata: { ...clusters[0]!.metadata, labels: { "liken.sh/ring": "canary" } },
      },
    ];
    s = await samples(m);
    expect(total(s, "liken_operator_cluster_info", { cluster: "lab", ring: "canary" })).toBe(1);

    // The turn given back and no condition yet: their series go.
    clusters = [cluster({ maxUnavailable: 1, turns: [] })];
    s = await samples(m);
    expect(s.filter((x) => x.name === "liken_operator_turn_granted_timestamp_seconds")).toEqual([]);
    expect(s.filter((x) => x.name === "liken_operator_channel_condition")).toEqual([]);
    expect(total(s, "liken_operator_turn_budget", { cluster: "lab" })).toBe(1);
  });

  it("counts channel reads by result", async () => {
    const m = new OperatorMetrics({ clusters: () => [], machines: () => [], leading: () => true });
    m.channelRead("lab", "ChannelRead");
    m.channelRead("lab", "ChannelRead");
    m.channelRead("lab", "ChannelUnreachable");
    const s = await samples(m);
    expect(
      total(s, "liken_operator_channel_reads_total", { cluster: "lab", result: "ChannelRead" }),
    ).toBe(2);
    expect(total(s, "liken_operator_channel_reads_total", { cluster: "lab" })).toBe(3);
  });
});

describe("agent metrics", () => {
  it("counts downloaded bytes forward only, step durations by result, the last trial", async () => {
    const base = total(await samples(agentMetrics), "liken_agent_downloaded_bytes_total");
    agentMetrics.downloaded(0, 4096);
    agentMetrics.downloaded(4096, 1024); // a restarted download: nothing counted backwards
    agentMetrics.downloaded(1024, 3072);
    agentMetrics.step("drain", 2500, true);
    agentMetrics.step("promote", 5, false);
    let s = await samples(agentMetrics);
    expect(total(s, "liken_agent_downloaded_bytes_total") - base).toBe(4096 + 2048);
    const reused = total(s, "liken_agent_download_reused_bytes_total");
    const fetched = total(s, "liken_agent_download_fetched_bytes_total");
    agentMetrics.reused(8192);
    agentMetrics.fetched(100);
    s = await samples(agentMetrics);
    expect(total(s, "liken_agent_download_reused_bytes_total") - reused).toBe(8192);
    expect(total(s, "liken_agent_download_fetched_bytes_total") - fetched).toBe(100);
    expect(total(s, "liken_agent_step_duration_seconds_sum", { step: "drain", result: "ok" })).toBe(
      2.5,
    );
    expect(
      total(s, "liken_agent_step_duration_seconds_count", { step: "promote", result: "failed" }),
    ).toBe(1);
    expect(s.some((x) => x.name === "liken_agent_last_trial")).toBe(false);

    agentMetrics.trialFrom(() => ({
      version: V2,
      digest: D2,
      slot: "b",
      result: "Failed",
      at: "2026-12-02T10:00:00Z",
      reason: "TrialFellBack",
    }));
    s = await samples(agentMetrics);
    expect(total(s, "liken_agent_last_trial", { result: "Failed", version: V2 })).toBe(1);
    expect(total(s, "liken_agent_last_trial", { result: "Succeeded" })).toBe(0);
    expect(total(s, "liken_agent_last_trial_timestamp_seconds")).toBe(
      Date.parse("2026-12-02T10:00:00Z") / 1000,
    );
  });
});
