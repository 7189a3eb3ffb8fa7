import { describe, expect, it } from "vitest";
import type { Cluster, Machine } from "../../src/api/types.js";
import { machineDetail, progressBar, renderStatus } from "../../src/cli/views/status.js";

const now = new Date("2026-12-02T12:00:00Z");
const cluster: Cluster = {
  apiVersion: "liken.sh/v1alpha1",
  kind: "Cluster",
  metadata: { name: "lab" },
  spec: {
    version: "2026.10.12-001",
    releases: {
      source: "http://127.0.0.1:1",
      catalog: [{ version: "2026.10.12-001", digest: "sha256:x" }],
    },
  },
  status: {
    phase: "Updating",
    machines: "1/4",
    available: "2026.10.12-001",
    rebootTurns: [
      {
        machine: "node-2",
        grantedAt: "2026-12-02T11:58:00Z",
        grantedBy: "op-1",
        leader: true,
        version: "2026.10.12-001",
      },
    ],
    conditions: [
      {
        type: "Progressing",
        status: "False",
        reason: "RolloutStalled",
        message: "node-2 has not come back for 5m",
        lastTransitionTime: "2026-12-02T11:59:00Z",
      },
    ],
  },
};

function machine(
  name: string,
  status: Machine["status"],
  spec: Partial<Machine["spec"]> = {},
): Machine {
  return {
    apiVersion: "liken.sh/v1alpha1",
    kind: "Machine",
    metadata: { name },
    spec: { cluster: "lab", nodeName: name, ...spec },
    ...(status ? { status } : {}),
  };
}

describe("liken status view", () => {
  it("draws a bar that follows the bytes", () => {
    expect(progressBar(0, 100, 10)).toBe("[..........]   0%");
    expect(progressBar(58, 100, 10)).toBe("[#####.....]  58%");
    expect(progressBar(100, 100, 10)).toBe("[##########] 100%");
    expect(progressBar(5, 0, 10)).toBe("[..........]   0%");
  });

  it("says what each machine waits for, in words a person can act on", () => {
    const pending = machine(
      "node-5",
      {
        step: "RebootPending",
        staged: { version: "2026.10.12-001", digest: "sha256:x", slot: "b", at: "" },
      },
      { rebootPolicy: "Manual" },
    );
    expect(machineDetail(pending, cluster, { now })).toBe(
      "2026.10.12-001 staged; waiting for: liken approve-reboot lab node-5",
    );
    const held = machine("node-6", {
      step: "UpdatePending",
      staged: { version: "2026.10.12-001", digest: "sha256:x", slot: "b", at: "" },
      blockingPods: ["backup/nightly-1"],
    });
    expect(machineDetail(held, cluster, { now })).toBe(
      "2026.10.12-001 staged; no turn asked while backup/nightly-1 runs on its node (spec.disruption.blockingPods)",
    );
    const blocked = machine("node-2", {
      step: "Updating",
      updateStage: "Draining",
      drainBlocker: {
        pod: "shop/web-1",
        podDisruptionBudget: "shop/web",
        since: "2026-12-02T11:59:00Z",
        message: "",
      },
    });
    expect(machineDetail(blocked, cluster, { now })).toBe(
      "draining (turn 2m): blocked by pod shop/web-1 (PodDisruptionBudget shop/web) for 60s",
    );
    const dl = machine("node-4", {
      step: "Downloading",
      progress: { bytesDone: 512 * 1024, bytesTotal: 1024 * 1024, percent: 50, artifact: "rootfs" },
    });
    expect(machineDetail(dl, cluster, { now })).toContain("50% 512.0 KiB/1.0 MiB rootfs");
    const adaptive = machine("node-4", {
      step: "Downloading",
      progress: {
        bytesDone: 512 * 1024,
        bytesTotal: 1024 * 1024,
        percent: 50,
        bytesReused: 480 * 1024,
        bytesFetched: 40 * 1024,
      },
    });
    expect(machineDetail(adaptive, cluster, { now })).toContain(
      "50% 512.0 KiB/1.0 MiB (fetched 40.0 KiB, reused 480.0 KiB)",
    );
    const indexing = machine("node-4", {
      step: "Downloading",
      bootedSlot: "a",
      target: { version: "2026.10.12-001", digest: `sha256:${"0".repeat(64)}` },
      progress: {
        bytesDone: 0,
        bytesTotal: 1024 * 1024,
        percent: 0,
        stage: "Indexing",
        stagePercent: 37,
      },
    });
    expect(machineDetail(indexing, cluster, { now })).toContain(
      "37% indexing slot a before downloading 2026.10.12-001",
    );
  });

  it("lists the machines of the cluster, the turns, and a stall", () => {
    const lines = renderStatus(
      cluster,
      [
        machine(
          "node-1",
          { step: "Ready", version: "2026.10.12-001" },
          { role: "Leader", rebootPolicy: "Auto" },
        ),
        machine("other", { step: "Ready" }, { cluster: "elsewhere" }),
      ],
      { now },
    );
    expect(lines[0]).toBe(
      "cluster lab: Updating, machines 1/4, target 2026.10.12-001, available 2026.10.12-001, turns node-2",
    );
    expect(lines[1]).toMatch(/^ {2}MACHINE +ROLE +POLICY +LIKEN +STATUS +DETAIL$/);
    expect(lines[2]).toMatch(/^ {2}node-1 +Leader +Auto +2026\.10\.12-001 +Ready$/);
    expect(lines.join("\n")).not.toContain("other");
    expect(lines.at(-1)).toBe("Progressing False RolloutStalled: node-2 has not come back for 5m");
  });

  it("names the first trial a release waits for, and a trial that failed its health gate", () => {
    const c: Cluster = {
      ...cluster,
      status: {
        ...cluster.status,
        conditions: [
          {
            type: "Progressing",
            status: "True",
            reason: "AwaitingFirstTrial",
            message: "waiting for the first trial of 2026.10.12-001 (node-2)",
            lastTransitionTime: "2026-12-02T11:59:00Z",
          },
        ],
      },
    };
    const failed = machine("node-3", {
      step: "Failed",
      version: "2026.10.10-001",
      lastTrial: {
        version: "2026.10.12-001",
        digest: `sha256:${"2".repeat(64)}`,
        slot: "b",
        result: "Failed",
        at: "2026-12-02T11:50:00Z",
        reason: "HealthCheckFailed",
        message: "health gate command etcd did not pass within 900000 ms: exited with 3: unhealthy",
      },
    });
    const text = renderStatus(c, [failed], { now }).join("\n");
    expect(text).toContain(
      "Progressing True AwaitingFirstTrial: waiting for the first trial of 2026.10.12-001 (node-2)",
    );
    expect(text).toContain(
      "2026.10.12-001 failed on slot b: HealthCheckFailed: health gate command etcd did not pass",
    );
  });

  it("names a machine whose identity is about to lapse, and no healthy one", () => {
    const c = cluster;
    const expiring = machine("node-4", {
      step: "Ready",
      version: "2026.10.10-001",
      certificateExpiry: "2026-12-05T00:00:00Z",
      conditions: [
        {
          type: "IdentityCurrent",
          status: "False",
          reason: "ExpiresSoon",
          message:
            "the client certificate expires at 2026-12-05T00:00:00Z and no renewal succeeded",
          lastTransitionTime: "2026-12-02T11:00:00Z",
        },
      ],
    });
    const fine = machine("node-5", {
      step: "Ready",
      version: "2026.10.10-001",
      certificateExpiry: "2027-12-05T00:00:00Z",
      conditions: [
        {
          type: "IdentityCurrent",
          status: "True",
          reason: "Renewed",
          message: "client certificate valid until 2027-12-05T00:00:00Z",
          lastTransitionTime: "2026-12-02T11:00:00Z",
        },
      ],
    });
    const lines = renderStatus(c, [expiring, fine], { now });
    expect(lines).toContain(
      "Identity node-4: certificate expires 2026-12-05T00:00:00Z (ExpiresSoon): the client certificate expires at 2026-12-05T00:00:00Z and no renewal succeeded",
    );
    expect(lines.join("\n")).not.toMatch(/Identity node-5/);
  });
});

describe("liken status: the channel trust modes", () => {
  it("says the target, the wave it waits for, when the metadata expires, a recall, and ChannelTrusted", () => {
    const c: Cluster = {
      apiVersion: "liken.sh/v1alpha1",
      kind: "Cluster",
      metadata: { name: "c" },
      spec: {
        releases: {
          source: "http://x/",
          trust: {
            mode: "channel",
            channel: "stable",
            rootDigest: `sha256:${"a".repeat(64)}`,
            follow: {},
          },
        },
      },
      status: {
        trust: {
          mode: "channel",
          target: { version: "1.0", digest: `sha256:${"b".repeat(64)}` },
          newest: { version: "2.0", digest: `sha256:${"c".repeat(64)}` },
          waveOpensAt: "2026-12-05T10:00:00Z",
          expiresAt: "2026-12-05T00:00:00Z",
          expiresRole: "timestamp",
          freshness: "fresh until 2026-12-05T00:00:00Z",
        },
        conditions: [
          {
            type: "ChannelTrusted",
            status: "True",
            reason: "MetadataVerified",
            message: "metadata verified",
            lastTransitionTime: "2026-12-04T00:00:00Z",
          },
        ],
      },
    };
    const text = renderStatus(c, [], { now: new Date("2026-12-04T12:00:00Z") }).join("\n");
    expect(text).toContain("target 1.0");
    expect(text).toContain("waiting for its wave for 2.0 until 2026-12-05T10:00:00Z");
    expect(text).toContain("metadata expires 2026-12-05T00:00:00Z (timestamp)");
    expect(text).toContain("Trust True MetadataVerified");
  });
});
