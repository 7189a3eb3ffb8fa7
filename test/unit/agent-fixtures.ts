// What agent unit tests observe: three releases and one complete Observed to vary.
import type { Observed } from "../../src/agent/steps.js";

/** When the observed boot started (wall ms); the fixture's Node heartbeat is a minute later. */
export const BOOT_STARTED_AT = Date.parse("2026-10-12T08:00:00Z");

export const V1 = { version: "2026.10.10-001", digest: `sha256:${"1".repeat(64)}` };
export const V2 = { version: "2026.10.12-001", digest: `sha256:${"2".repeat(64)}` };
export const V3 = { version: "2026.10.14-001", digest: `sha256:${"3".repeat(64)}` };

/** Running V1 from slot a, target V2, nothing in slot b yet, Auto, API and node fine. */
export function observed(over: Partial<Observed> = {}): Observed {
  return {
    now: 1_000_000,
    apiReachable: true,
    boot: { kind: "steady", slot: "a" },
    running: { slot: "a", state: "staged", release: V1 },
    other: { slot: "b", state: "empty" },
    target: V2,
    policy: "Auto",
    approval: undefined,
    turn: false,
    download: undefined,
    downloadIdleSince: undefined,
    downloadFailedAt: undefined,
    failedDigests: [],
    drainedDigest: undefined,
    nodeName: "m1",
    node: { bootId: "boot-1", ready: { status: "True", heartbeatAt: BOOT_STARTED_AT + 60_000 } },
    nodeUnread: undefined,
    bootStartedAt: BOOT_STARTED_AT,
    trialSeenAt: undefined,
    bootId: "boot-1",
    armedTrial: undefined,
    ...over,
  };
}
