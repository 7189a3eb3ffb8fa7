// Approving a reboot only when it can do something (issue 42, item 2), and the DETAIL of a
// Manual machine that does not send a person to a command that cannot help (item 1).
import { describe, expect, it } from "vitest";
import type { Cluster, ClusterCondition, Machine } from "../../src/api/types.js";
import { approvable } from "../../src/cli/views/approval.js";
import { machineDetail } from "../../src/cli/views/status.js";

const now = new Date("2026-12-02T12:00:00Z");
const V10 = { version: "2026.10.10-001", digest: `sha256:${"a".repeat(64)}` };
const V12 = { version: "2026.10.12-001", digest: `sha256:${"b".repeat(64)}` };
const V13 = { version: "2026.10.13-001", digest: `sha256:${"c".repeat(64)}` };

function cluster(target = V12, progressing?: Partial<ClusterCondition>): Cluster {
  return {
    apiVersion: "liken.sh/v1alpha1",
    kind: "Cluster",
    metadata: { name: "lab" },
    spec: {
      version: target.version,
      releases: { source: "http://127.0.0.1:1", catalog: [V10, V12, V13] },
    },
    status: {
      conditions: progressing
        ? [
            {
              type: "Progressing",
              status: "False",
              reason: "ReleaseFailed",
              message: "1 machine(s) failed their trial",
              lastTransitionTime: "2026-12-02T11:00:00Z",
              ...progressing,
            } as ClusterCondition,
          ]
        : [],
    },
  };
}

function machine(
  o: { policy?: "Manual" | "Auto"; runs?: string; staged?: typeof V12 } = {},
): Machine {
  return {
    apiVersion: "liken.sh/v1alpha1",
    kind: "Machine",
    metadata: { name: "node-1" },
    spec: { cluster: "lab", nodeName: "node-1", rebootPolicy: o.policy ?? "Manual" },
    status: {
      version: o.runs ?? V10.version,
      step: o.staged ? "RebootPending" : "Ready",
      ...(o.staged ? { staged: { ...o.staged, slot: "b", at: "" } } : {}),
    },
  } as Machine;
}

describe("approvable", () => {
  it.each([
    ["staged the target, nothing held", cluster(), machine({ staged: V12 }), "ok"],
    [
      "an Auto machine",
      cluster(),
      machine({ policy: "Auto", staged: V12 }),
      "LIKEN_CLI_APPROVAL_AUTO",
    ],
    [
      "already on the target",
      cluster(V10),
      machine({ runs: V10.version }),
      "LIKEN_CLI_APPROVAL_ON_TARGET",
    ],
    ["nothing staged", cluster(), machine(), "LIKEN_CLI_APPROVAL_NOT_STAGED"],
    [
      "staged a release no longer the target",
      cluster(V12),
      machine({ staged: V13 }),
      "LIKEN_CLI_APPROVAL_NOT_TARGET",
    ],
    [
      "the rollout held by a failed release",
      cluster(V12, {}),
      machine({ staged: V12 }),
      "LIKEN_CLI_APPROVAL_HELD",
    ],
  ] as const)("%s", (_why, c, m, want) => {
    const a = approvable(c, m);
    expect(a.ok ? "ok" : a.code).toBe(want);
  });

  it("says why, and what to do instead", () => {
    const a = approvable(cluster(V10), machine({ runs: V10.version }));
    expect(a.ok ? "" : a.why).toBe(
      "Machine node-1 already runs the target 2026.10.10-001; there is no reboot to approve",
    );
  });
});

describe("DETAIL of a Manual machine", () => {
  it("names liken approve-reboot only when approving can help", () => {
    const m = machine({ staged: V12 });
    expect(machineDetail(m, cluster(), { now })).toBe(
      "2026.10.12-001 staged; waiting for: liken approve-reboot lab node-1",
    );
    const held = machineDetail(m, cluster(V12, {}), { now });
    expect(held).not.toContain("waiting for: liken approve-reboot");
    expect(held).toContain("approving cannot help now");
    expect(held).toContain("held (ReleaseFailed)");
  });
});
