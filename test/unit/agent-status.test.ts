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

  it("a staged release the target moved away from is not shown as staged", () => {
    // Retargeted back to the running release: the slot keeps V2's bytes, but nothing will try it.
    const s = status(obs({ target: V1 }));
    expect(s.staged).toBeUndefined();
    expect(s.slots?.find((x) => x.name === "b")?.state).toBe("Inactive");
  });

  it("runs the target's version under another catalog digest: Ready, no turn, says why", () => {
    const rebuilt = { version: V1.version, digest: V2.digest };
    const s = status(obs({ target: rebuilt, other: { slot: "b", state: "empty" } }));
    expect(s.step).toBe("Ready");
    expect(s.turnRequest).toBeUndefined();
    expect(s.conditions?.find((c) => c.type === "UpToDate")).toMatchObject({
      status: "True",
      reason: "RunsTargetVersionOtherDigest",
      message: expect.stringContaining(
        `runs ${V1.version} as built with digest ${V1.digest}; the catalog now names ${V2.digest}`,
      ),
    });
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
      node: undefined,
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

  it("a trial without a verdict: TrialInconclusive while it is about the target, never a failure", () => {
    const noVerdict = {
      ...V2,
      slot: "b" as const,
      reason: "TrialNotArmed",
      attempts: 1,
      at: "2026-12-02T11:59:00Z",
      message: "the trial of 2026.10.12-001 in slot b could not be shown armed (attempt 1): EIO",
    };
    const mem = { failed: [], noVerdict };
    const o = obs({ turn: true, drainedDigest: V2.digest, noVerdict });
    const s = machineStatus(undefined, o, decide(o), mem, { now });
    expect(s.step).toBe("Updating");
    expect(s.failedReleases).toBeUndefined();
    expect(s.lastTrial).toBeUndefined();
    const c = s.conditions?.find((x) => x.type === "TrialInconclusive");
    expect(c).toMatchObject({ status: "True", reason: "TrialNotArmed" });
    expect(c?.message).toContain("EIO; the release is not counted as failed");
    expect(c?.message).toContain("attempt 1 of 3");
    // Used up: the condition says what to do.
    const used = { ...noVerdict, attempts: 3 };
    const h = obs({ noVerdict: used });
    const held = machineStatus(undefined, h, decide(h), { failed: [], noVerdict: used }, { now });
    expect(held.step).toBe("Failed");
    expect(held.conditions?.find((x) => x.type === "TrialInconclusive")?.message).toContain(
      "liken.sh/retry",
    );
    // About another release than the target: not shown.
    const other = obs({ target: V1 });
    const gone = machineStatus(undefined, other, decide(other), mem, { now });
    expect(gone.conditions?.find((x) => x.type === "TrialInconclusive")).toBeUndefined();
  });

  it("keeps the operator's Alive condition as it wrote it, over a Lost mark too", () => {
    const o = obs();
    const alive = {
      type: "Alive" as const,
      status: "False" as const,
      reason: "NoHeartbeat",
      message: "no heartbeat (Lease m1) for 40 s; it was UpdatePending",
      lastTransitionTime: "2026-12-02T11:59:00Z",
    };
    const mine = status(o);
    const marked = { ...mine, step: "Lost" as const, conditions: [...mine.conditions!, alive] };
    const next = machineStatus(marked, o, decide(o), { failed: [] }, { now });
    // The agent writes its step back (it lives) and leaves the operator's word in place: the
    // operator reads that as "alive but its heartbeat unseen" and stops marking it Lost.
    expect(next.step).toBe("UpdatePending");
    expect(next.conditions?.find((c) => c.type === "Alive")).toEqual(alive);
    // Written once: the status it wrote is the status it would write again.
    expect(sameStatus(next, machineStatus(next, o, decide(o), { failed: [] }, { now }))).toBe(true);
  });

  it("a trial without a verdict: TrialSucceeded Unknown with its reason, no failed release", () => {
    const mem = {
      failed: [],
      lastTrial: {
        ...V2,
        slot: "b" as const,
        result: "Inconclusive" as const,
        at: "2026-12-02T11:59:00Z",
        reason: "TrialUnobserved",
        message: "never read Node m1 (API server not reachable); no verdict on the release",
      },
    };
    const o = obs({ other: { slot: "b", state: "withdrawn" } });
    const s = machineStatus(undefined, o, decide(o), mem, { now });
    expect(s.step).not.toBe("Failed");
    expect(s.failedReleases).toBeUndefined();
    expect(s.conditions?.find((c) => c.type === "TrialSucceeded")).toMatchObject({
      status: "Unknown",
      reason: "TrialUnobserved",
      message: expect.stringMatching(/never read Node m1/),
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

describe("machineStatus: the post-promotion health verdict", () => {
  const verdict = (bootID: string) => ({
    ...V1,
    bootID,
    result: "Failed" as const,
    gate: "command nic",
    message: "exited with 1",
    at: "2026-12-02T11:59:00Z",
  });
  it("reports the new verdict, and keeps the one written before until there is a new one", () => {
    const o = obs();
    const fresh = machineStatus(
      undefined,
      o,
      decide(o),
      { failed: [] },
      {
        now,
        postPromotionHealth: verdict("boot-2"),
      },
    );
    expect(fresh.postPromotionHealth).toEqual(verdict("boot-2"));
    const prev = { postPromotionHealth: verdict("boot-1") };
    expect(machineStatus(prev, o, decide(o), { failed: [] }, { now }).postPromotionHealth).toEqual(
      verdict("boot-1"),
    );
  });
});
