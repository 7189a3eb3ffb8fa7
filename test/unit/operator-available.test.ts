// The AVAILABLE column marks the release a machine of this Cluster failed, or a revert revoked
// (issue 42, item 1): a person must not read "newer release, take it" there.
import { describe, expect, it } from "vitest";
import type { Machine, RevokedRelease } from "../../src/api/index.js";
import { availableText } from "../../src/operator/status/available.js";

const D = `sha256:${"d".repeat(64)}`;

function machine(name: string, failed: string[] = []): Machine {
  return {
    apiVersion: "liken.sh/v1alpha1",
    kind: "Machine",
    metadata: { name },
    spec: { cluster: "lab", nodeName: name },
    status: {
      step: "Ready",
      failedReleases: failed.map((version) => ({
        version,
        digest: D,
        at: "2026-10-13T10:00:00Z",
        reason: "TrialFellBack",
      })),
    },
  } as Machine;
}

const revoked = (version: string): RevokedRelease => ({
  version,
  digest: D,
  reason: "RevertedOnHealthGate",
  at: "2026-10-13T10:00:00Z",
});

describe("availableText", () => {
  it.each([
    ["nothing announced", undefined, [], [], undefined],
    ["a release nobody failed", "2026.10.13-001", [machine("node-1")], [], "2026.10.13-001"],
    [
      "failed on one machine",
      "2026.10.13-001",
      [machine("node-2", ["2026.10.13-001"]), machine("node-1")],
      [],
      "2026.10.13-001 (failed on node-2)",
    ],
    [
      "failed on three",
      "2026.10.13-001",
      ["node-3", "node-1", "node-2"].map((n) => machine(n, ["2026.10.13-001"])),
      [],
      "2026.10.13-001 (failed on node-1 +2)",
    ],
    [
      "an older failure does not mark a newer release",
      "2026.10.14-001",
      [machine("node-2", ["2026.10.13-001"])],
      [],
      "2026.10.14-001",
    ],
    [
      "revoked by a revert",
      "2026.10.13-001",
      [machine("node-2", ["2026.10.13-001"])],
      [revoked("2026.10.13-001")],
      "2026.10.13-001 (revoked)",
    ],
  ] as const)("%s", (_why, available, machines, rev, want) => {
    expect(availableText(available, machines, rev)).toBe(want);
  });
});
