// The Node as the agent's watch keeps it (src/agent/look.ts, trimNode): only what the agent
// reads of it, and nothing the agent reads lost.
import { describe, expect, it } from "vitest";
import type { NodeView } from "../../src/agent/api.js";
import { nodeSeenOf, trimNode } from "../../src/agent/look.js";

/** A kubelet's Node, as the API server sends it (abridged, but with what makes it large). */
function kubeletNode(status: Record<string, unknown>): NodeView {
  return {
    metadata: {
      name: "worker-1",
      resourceVersion: "812",
      labels: { "kubernetes.io/hostname": "worker-1" },
      annotations: { "node.alpha.kubernetes.io/ttl": "0" },
      managedFields: [{ manager: "kubelet", fieldsV1: { "f:status": {} } }],
    },
    spec: { podCIDR: "10.244.1.0/24" },
    status: {
      images: Array.from({ length: 50 }, (_, i) => ({
        names: [`registry/img-${i}`],
        sizeBytes: i,
      })),
      addresses: [{ type: "InternalIP", address: "10.0.0.7" }],
      ...status,
    },
  } as unknown as NodeView;
}

const ready = { type: "Ready", status: "True", lastHeartbeatTime: "2026-12-05T09:00:00Z" };
const pressure = {
  type: "MemoryPressure",
  status: "False",
  lastHeartbeatTime: "2026-12-05T09:00:00Z",
};

describe("trimNode: the agent's watch keeps what it reads of its Node", () => {
  it.each([
    [
      "Ready and a bootID",
      { conditions: [pressure, ready], nodeInfo: { bootID: "b-1", kernelVersion: "6.1" } },
    ],
    ["no Ready condition", { conditions: [pressure], nodeInfo: { bootID: "b-2" } }],
    ["Ready without a heartbeat time", { conditions: [{ type: "Ready", status: "Unknown" }] }],
    ["no status fields at all", {}],
  ])("%s: the same boot and readiness as the whole Node", (_why, status) => {
    const node = kubeletNode(status);
    const whole = nodeSeenOf(structuredClone(node));
    expect(nodeSeenOf(trimNode(node))).toEqual(whole);
  });

  it("drops everything else (images, managed fields, other conditions)", () => {
    const node = kubeletNode({
      conditions: [pressure, ready],
      nodeInfo: { bootID: "b-1", kernelVersion: "6.1" },
    });
    expect(trimNode(node)).toEqual({
      metadata: {
        name: "worker-1",
        resourceVersion: "812",
        labels: { "kubernetes.io/hostname": "worker-1" },
      },
      status: { conditions: [ready], nodeInfo: { bootID: "b-1" } },
    });
  });
});
