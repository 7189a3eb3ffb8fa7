import { describe, expect, it } from "vitest";
import { drainStopReason } from "../../src/agent/drain-stop.js";
import { observed, V1, V2, V3 } from "./agent-fixtures.js";

// Draining for V2 (staged in slot b) while running V1.
const rows: { name: string; over: Parameters<typeof observed>[0]; stop: string | undefined }[] = [
  { name: "the target is still the drained release: drain on", over: {}, stop: undefined },
  {
    name: "the Cluster could not be read: drain on (no verdict from a failed look)",
    over: { apiReachable: false, target: undefined },
    stop: undefined,
  },
  {
    name: "retarget to another release: stop",
    over: { target: V3 },
    stop: `the target changed from ${V2.version} to ${V3.version}`,
  },
  {
    name: "revert to the running release: stop",
    over: { target: V1 },
    stop: `the target went back from ${V2.version} to ${V1.version}, which this machine runs`,
  },
  {
    name: "same version, another digest (a catalog entry replaced): stop",
    over: { target: { version: V2.version, digest: V3.digest } },
    stop: `the catalog entry of ${V2.version} now names digest ${V3.digest}, not the drained ${V2.digest}`,
  },
  {
    name: "no target any more: stop",
    over: { target: undefined },
    stop: `the Cluster no longer names a target (it was ${V2.version})`,
  },
];

describe("drainStopReason", () => {
  it.each(rows)("$name", ({ over, stop }) => {
    expect(drainStopReason(observed(over), V2)).toBe(stop);
  });
});
