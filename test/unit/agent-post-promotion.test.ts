// When the agent runs its health gates again after promotion, and the verdict it writes.
import { describe, expect, it } from "vitest";
import type { Cluster, PostPromotionHealth } from "../../src/api/types.js";
import {
  POST_PROMOTION_INTERVAL_MS,
  postPromotionStep,
  verdictOf,
  type PostPromotionInput,
} from "../../src/agent/post-promotion.js";

const NOW = Date.parse("2026-11-03T12:00:00Z");
const iso = (ms: number) => new Date(ms).toISOString();
const V2 = { version: "2026.11.02-001", digest: "sha256:" + "2".repeat(64) };
const V1 = { version: "2026.11.01-001", digest: "sha256:" + "1".repeat(64) };

function cluster(over: { revert?: boolean; since?: number; version?: string } = {}): Cluster {
  return {
    apiVersion: "liken.sh/v1alpha1",
    kind: "Cluster",
    metadata: { name: "c" },
    spec: {
      version: over.version ?? V2.version,
      releases: { source: "http://x", catalog: [V1, V2] },
      ...(over.revert === false
        ? {}
        : { rollout: { revert: { maxFailures: 1, watchSeconds: 3600 } } }),
    },
    status: { lastKnownGood: { ...V2, since: iso(NOW - (over.since ?? 600) * 1000) } },
  } as Cluster;
}
const verdict = (over: Partial<PostPromotionHealth> = {}): PostPromotionHealth => ({
  ...V2,
  bootID: "boot-1",
  result: "Passed",
  at: iso(NOW - 10_000),
  ...over,
});
const input = (over: Partial<PostPromotionInput> = {}): PostPromotionInput => ({
  running: V2,
  bootID: "boot-1",
  cluster: cluster(),
  gates: 1,
  last: verdict(),
  now: NOW,
  ...over,
});

describe("postPromotionStep", () => {
  it.each([
    ["no revert policy: nothing watches", input({ cluster: cluster({ revert: false }) }), "idle"],
    ["no gate configured", input({ gates: 0 }), "idle"],
    ["no verdict yet", input({ last: undefined }), "run"],
    [
      "a verdict of another boot is not evidence of this one",
      input({ last: verdict({ bootID: "boot-0" }) }),
      "run",
    ],
    ["a verdict of another release", input({ last: verdict(V1) }), "run"],
    ["checked 10 s ago", input(), "idle"],
    [
      "checked an interval ago",
      input({ last: verdict({ at: iso(NOW - POST_PROMOTION_INTERVAL_MS) }) }),
      "run",
    ],
    [
      "past the watch window after it became known good",
      input({ cluster: cluster({ since: 7200 }) }),
      "idle",
    ],
    [
      "running neither the target nor the last known good",
      input({ running: V1, cluster: cluster({ version: "2026.11.03-001" }) }),
      "idle",
    ],
  ] as const)("%s", (_, i, kind) => {
    expect(postPromotionStep(i).kind).toBe(kind);
  });
});

describe("verdictOf", () => {
  it("names the release, this boot and the gate that failed", () => {
    const at = iso(NOW);
    expect(verdictOf({ gates: ["command nic"], at: 5 }, V2, "boot-1", at)).toEqual({
      ...V2,
      bootID: "boot-1",
      result: "Passed",
      at,
    });
    const failed = {
      gates: ["command nic"],
      at: 5,
      failed: { gate: "command nic", output: "exited with 1" },
    };
    expect(verdictOf(failed, V2, "boot-1", at)).toEqual({
      ...V2,
      bootID: "boot-1",
      result: "Failed",
      gate: "command nic",
      message: "exited with 1",
      at,
    });
  });
});
