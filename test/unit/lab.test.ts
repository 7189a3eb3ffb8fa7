import { describe, expect, it } from "vitest";
import type { Cluster, Machine } from "../../src/api/types.js";
import { measure } from "../../src/lab/observer.js";
import { kernelBehaviour, labKernel } from "../../src/lab/releases.js";
import { defaultFleet } from "../../src/lab/fleet.js";
import { bootStatusPatch } from "../../src/lab/kubelet.js";

function cluster(turns: { machine: string; leader: boolean }[]): Cluster {
  return {
    apiVersion: "liken.sh/v1alpha1",
    kind: "Cluster",
    metadata: { name: "lab" },
    spec: { releases: { source: "x" } },
    status: {
      rebootTurns: turns.map((t) => ({ ...t, grantedAt: "", grantedBy: "", version: "v" })),
    },
  };
}
const machine = (
  name: string,
  role: "Leader" | "Worker",
  step?: "Lost" | "Ready",
  clusterName = "lab",
): Machine => ({
  apiVersion: "liken.sh/v1alpha1",
  kind: "Machine",
  metadata: { name },
  spec: { cluster: clusterName, nodeName: name, role },
  ...(step ? { status: { step } } : {}),
});

describe("the rollout observer's figures", () => {
  it.each([
    { turns: [], machines: [], want: { turnsInFlight: 0, leadersDown: 0, unavailable: 0 } },
    {
      turns: [{ machine: "l1", leader: true }],
      machines: [machine("l1", "Leader"), machine("w1", "Worker")],
      want: { turnsInFlight: 1, leadersDown: 1, unavailable: 1 },
    },
    {
      // A Lost leader is down as surely as one holding a turn.
      turns: [{ machine: "l1", leader: true }],
      machines: [machine("l1", "Leader"), machine("l2", "Leader", "Lost"), machine("w1", "Worker")],
      want: { turnsInFlight: 1, leadersDown: 2, unavailable: 2 },
    },
    {
      turns: [
        { machine: "w1", leader: false },
        { machine: "w2", leader: false },
      ],
      machines: [
        machine("w1", "Worker"),
        machine("w2", "Worker"),
        machine("x", "Leader", "Lost", "other"),
      ],
      want: { turnsInFlight: 2, leadersDown: 0, unavailable: 2 },
    },
  ])("counts $want", ({ turns, machines, want }) => {
    expect(measure(cluster(turns), machines)).toEqual(want);
  });
});

describe("lab releases", () => {
  it("a kernel's bytes say how it boots", () => {
    expect(kernelBehaviour(labKernel("v1", "ok"))).toBe("ok");
    expect(kernelBehaviour(labKernel("v1", "panic"))).toBe("panic");
    expect(kernelBehaviour(labKernel("v1", "hang"))).toBe("hang");
    // bad-release --kubelet-down: it boots, its kubelet never starts (src/lab/machine.ts).
    expect(kernelBehaviour(labKernel("v1", "kubelet-down"))).toBe("kubelet-down");
    expect(kernelBehaviour(labKernel("v1", "bad-after-promotion"))).toBe("bad-after-promotion");
    expect(kernelBehaviour(Buffer.alloc(4096))).toBe("ok");
    expect(labKernel("v1", "ok")).toEqual(labKernel("v1", "ok"));
    expect(labKernel("v1", "ok").length).toBe(64 * 1024);
  });

  it("the default fleet is three leaders and two workers, Auto and Manual", () => {
    const f = defaultFleet();
    expect(f.map((m) => `${m.name}:${m.role}:${m.rebootPolicy}`)).toEqual([
      "node-1:Leader:Auto",
      "node-2:Leader:Auto",
      "node-3:Leader:Auto",
      "node-4:Worker:Manual",
      "node-5:Worker:Manual",
    ]);
  });
});

describe("the lab's stand-in kubelet", () => {
  it("posts this boot's id and a Ready with a fresh heartbeat, merged by condition type", () => {
    const now = new Date("2026-12-04T05:00:00.123Z");
    expect(bootStatusPatch("b-1", now)).toEqual({
      status: {
        nodeInfo: { bootID: "b-1" },
        conditions: [
          {
            type: "Ready",
            status: "True",
            reason: "KubeletReady",
            message: "kubelet is posting ready status (liken lab)",
            lastHeartbeatTime: "2026-12-04T05:00:00Z",
            lastTransitionTime: "2026-12-04T05:00:00Z",
          },
        ],
      },
    });
  });
});
