import { describe, expect, it } from "vitest";
import { machineStatus, sameStatus } from "../../src/agent/status.js";
import { decide, type Observed } from "../../src/agent/steps.js";
import { observed, V1, V2 } from "./agent-fixtures.js";

const now = new Date("2026-12-02T12:00:00Z");

/** The fixture with V2 staged in slot b, at `now`. */
function obs(over: Partial<Observed> = {}): Observed {
  return observed({
    now: now.getTime(),
    other: { slot: "b", state: "staged", release: V2 },
    ...over,
  });
}

function status(o: Observed, mem = { failed: [] }) {
  return machineStatus(undefined, o, decide(o), mem, { now });
}

describe("machineStatus", () => {
  it("staged and asking: UpdatePending with the turn request and the staged slot", () => {
    const s = status(obs());
    expect(s).toMatchObject({
      version: V1.version,
      step: "UpdatePending",
      bootedSlot: "a",
      staged: { ...V2, slot: "b" },
      turnRequest: { ...V2, at: "2026-12-02T12:00:00Z" },
      slots: [
        { name: "a", state: "Active", version: V1.version },
        { name: "b", state: "Staged", version: V2.version },
      ],
    });
    expect(s.conditions?.find((c) => c.type === "ReleaseStaged")?.status).toBe("True");
    expect(s.conditions?.find((c) => c.type === "UpToDate")?.status).toBe("False");
  });

  it("Manual without approval: no turn request", () => {
    const s = status(obs({ policy: "Manual" }));
    expect(s.step).toBe("RebootPending");
    expect(s.turnRequest).toBeUndefined();
  });

  it("on trial: the running slot reads Trial and the turn is still held", () => {
    const o = obs({
      boot: { kind: "on-trial", slot: "b" },
      running: { slot: "b", state: "staged", release: V2 },
      other: { slot: "a", state: "staged", release: V1 },
      nodeReady: false,
      trialSeenAt: now.getTime(),
    });
    const s = status(o);
    expect(s).toMatchObject({ step: "Updating", updateStage: "Proving", bootedSlot: "b" });
    expect(s.turnRequest?.version).toBe(V2.version);
    expect(s.slots?.find((x) => x.name === "b")?.state).toBe("Trial");
    expect(s.slots?.find((x) => x.name === "a")?.state).toBe("Inactive");
  });

  it("a failed release is reported with the trial and the failed list", () => {
    const mem = {
      failed: [{ ...V2, at: "2026-12-02T11:59:00Z", reason: "TrialFellBack" }],
      lastTrial: {
        ...V2,
        slot: "b" as const,
        result: "Failed" as const,
        at: "2026-12-02T11:59:00Z",
        reason: "TrialFellBack",
        message: "came back on slot a",
      },
    };
    const o = obs({ other: { slot: "b", state: "withdrawn" }, failedDigests: [V2.digest] });
    const s = machineStatus(undefined, o, decide(o), mem, { now });
    expect(s.step).toBe("Failed");
    expect(s.turnRequest).toBeUndefined();
    expect(s.failedReleases).toHaveLength(1);
    expect(s.conditions?.find((c) => c.type === "TrialSucceeded")).toMatchObject({
      status: "False",
      reason: "TrialFellBack",
      message: "came back on slot a",
    });
  });

  it("keeps lastTransitionTime and the first ask's time across writes", () => {
    const first = status(obs());
    const later = new Date("2026-12-02T12:05:00Z");
    const o = obs({ now: later.getTime() });
    const second = machineStatus(first, o, decide(o), { failed: [] }, { now: later });
    expect(second.turnRequest?.at).toBe(first.turnRequest?.at);
    expect(second.conditions).toEqual(first.conditions);
    expect(sameStatus(first, { ...second, lastHeartbeatTime: "2026-12-02T12:05:00Z" })).toBe(true);
    expect(sameStatus(first, { ...second, step: "Updating" })).toBe(false);
  });

  it("a failure with the release staged (drain, reboot) reaches the status with its code", () => {
    const o = obs({ turn: true });
    const problem = {
      reason: "DrainFailed",
      message: "drain: node m1 not drained within 3600000 ms [LIKEN_DRAIN_TIMEOUT]",
    };
    const s = machineStatus(undefined, o, decide(o), { failed: [] }, { now, problem });
    expect(s.conditions?.find((c) => c.type === "ReleaseStaged")?.status).toBe("True");
    expect(s.conditions?.find((c) => c.type === "UpToDate")).toMatchObject({
      status: "False",
      reason: "DrainFailed",
      message: expect.stringMatching(/last failure: drain: .*\[LIKEN_DRAIN_TIMEOUT\]/),
    });
  });
});

describe("machineStatus within the CRD's bounds", () => {
  it("a trial message remembered before its bound is reported cut, not refused forever", () => {
    // A memory file written by an older agent: 20 artifacts' mismatches, 9 000 characters.
    const long = Array.from({ length: 20 }, (_, i) => `artifact-${i}: ${"d".repeat(440)}`).join(
      "; ",
    );
    const mem = {
      failed: [{ ...V2, at: "2026-12-02T11:59:00Z", reason: "SlotCheckMismatch" }],
      lastTrial: {
        ...V2,
        slot: "b" as const,
        result: "Skipped" as const,
        at: "2026-12-02T11:59:00Z",
        reason: "SlotCheckMismatch",
        message: long,
      },
    };
    const o = obs({ other: { slot: "b", state: "withdrawn" }, failedDigests: [V2.digest] });
    const s = machineStatus(undefined, o, decide(o), mem, { now });
    expect(s.lastTrial!.message!.length).toBeLessThanOrEqual(4096);
    expect(s.lastTrial!.message).toMatch(/^artifact-0: d+.*… and \d+ more characters$/);
    // The condition's bound is 32768: it keeps the whole message.
    expect(s.conditions?.find((c) => c.type === "TrialSucceeded")?.message).toBe(long);
  });
});
