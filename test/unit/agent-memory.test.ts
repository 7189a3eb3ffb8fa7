import { describe, expect, it } from "vitest";
import {
  armed,
  armShown,
  disarmed,
  disarming,
  drained,
  EMPTY_MEMORY,
  gaveUp,
  notArmed,
  promoted,
  retried,
  skipped,
  trialSeen,
  turnGivenBack,
  type Memory,
} from "../../src/agent/memory.js";
import { fellBack, notTaken } from "../../src/agent/memory-verdicts.js";
import { V1, V2 } from "./agent-fixtures.js";

const AT = "2026-12-02T12:00:00Z";

describe("memory transitions", () => {
  it("never change the memory they were given", () => {
    const m: Memory = { ...EMPTY_MEMORY, drainedDigest: V2.digest, trialSeenAt: 5 };
    const frozen = JSON.stringify(m);
    armed(m, V2, "b", AT);
    promoted(armed(m, V2, "b", AT), V2, "b", AT);
    fellBack(m, "b", "a", V2, AT);
    turnGivenBack(m);
    skipped(m, V2, "b", AT, "why");
    expect(JSON.stringify(m)).toBe(frozen);
  });

  it("armed, then promoted: the trial is forgotten and reported Succeeded", () => {
    const a = armed(trialSeen(EMPTY_MEMORY, 7), V2, "b", AT);
    expect(a.trial).toEqual({ ...V2, slot: "b", armedAt: AT, attempt: 1 });
    expect(a.trialSeenAt).toBeUndefined();
    const p = promoted(trialSeen(a, 9), V2, "b", AT);
    expect(p.trial).toBeUndefined();
    expect(p.trialSeenAt).toBeUndefined();
    expect(p.lastTrial).toMatchObject({ ...V2, result: "Succeeded", reason: "Promoted" });
  });

  it("a trial the agent gave up says why after the fallback; without that, what may have happened", () => {
    const a = armed(EMPTY_MEMORY, V2, "b", AT);
    const why = "trial of slot b did not rejoin within 900000 ms (cannot read the Node: 403)";
    const given = fellBack(gaveUp(a, why), "b", "a", undefined, AT);
    expect(given.lastTrial).toMatchObject({ ...V2, result: "Failed", reason: "TrialFellBack" });
    expect(given.lastTrial?.message).toContain(why);
    expect(given.failed.map((f) => f.digest)).toEqual([V2.digest]);
    expect(given.trial).toBeUndefined();
    expect(fellBack(a, "b", "a", undefined, AT).lastTrial?.message).toMatch(/panicked, hung/);
  });

  it("a trial flag this agent never armed is stale: no verdict on the slot's release, said once", () => {
    const m = fellBack(EMPTY_MEMORY, "b", "a", V1, AT);
    expect(m.lastTrial).toMatchObject({
      ...V1,
      slot: "b",
      result: "Inconclusive",
      reason: "TrialFlagStale",
    });
    expect(m.lastTrial?.message).toMatch(
      /^the bootloader shows a trial of slot b started, but this agent armed none there/,
    );
    expect(m.failed).toEqual([]);
    // A trial armed in the other slot does not make a flag in this one ours.
    expect(fellBack(armed(EMPTY_MEMORY, V2, "a", AT), "b", "a", V1, AT).failed).toEqual([]);
  });

  it("skipped remembers the release as failed once; retried forgets, once per value", () => {
    const s = skipped(
      skipped(EMPTY_MEMORY, V2, "b", AT, "kernel reads back wrong"),
      V2,
      "b",
      AT,
      "again",
    );
    expect(s.failed).toHaveLength(1);
    expect(s.lastTrial).toMatchObject({ result: "Skipped", reason: "SlotCheckMismatch" });
    const r = retried(s, "t1");
    expect(r.failed).toEqual([]);
    expect(retried(skipped(r, V2, "b", AT, "x"), "t1").failed).toHaveLength(1);
  });

  it("a trial not taken: remembered as failed with its own reason and what the bootloader showed", () => {
    const a = armed(EMPTY_MEMORY, V2, "b", AT, "boot-1");
    expect(a.trial).toEqual({ ...V2, slot: "b", armedAt: AT, bootId: "boot-1", attempt: 1 });
    const shows = "grubenv: saved_entry=a next_entry=b liken_trial=";
    const n = notTaken(a, { backend: "grub", running: "a", shows }, "2026-12-02T12:05:00Z");
    expect(n.lastTrial).toMatchObject({
      ...V2,
      slot: "b",
      result: "Failed",
      reason: "TrialNotTaken",
    });
    expect(n.lastTrial?.message).toContain(
      "grub did not take the trial of 2026.10.12-001 in slot b",
    );
    expect(n.lastTrial?.message).toContain(shows);
    expect(n.lastTrial?.message).toMatch(/save_env/);
    expect(n.failed).toMatchObject([{ ...V2, reason: "TrialNotTaken" }]);
    // Kept until the bootloader is disarmed; said once, however often a crash repeats the step.
    expect(n.trial).toEqual(a.trial);
    expect(
      notTaken(n, { backend: "grub", running: "a", shows: "later" }, "2026-12-02T12:06:00Z"),
    ).toBe(n);
    expect(disarmed(n).trial).toBeUndefined();
    expect(disarmed(n).lastTrial).toEqual(n.lastTrial);
    const sd = notTaken(a, { backend: "systemd-boot", running: "a", shows: undefined }, AT);
    expect(sd.lastTrial?.message).toMatch(/bootctl/);
    expect(notTaken(EMPTY_MEMORY, { backend: "grub", running: "a", shows }, AT)).toBe(EMPTY_MEMORY);
  });

  it("a trial never shown armed: counted per attempt, never failed, lastTrial untouched", () => {
    const last = fellBack(armed(EMPTY_MEMORY, V1, "b", AT), "b", "a", undefined, AT).lastTrial;
    const start: Memory = { ...EMPTY_MEMORY, lastTrial: last };
    const a1 = armed(start, V2, "b", AT, "boot-1");
    const n1 = notArmed(a1, "EIO", AT);
    expect(n1.noVerdict).toMatchObject({ ...V2, slot: "b", reason: "TrialNotArmed", attempts: 1 });
    expect(n1.noVerdict?.message).toContain("EIO");
    expect(n1.failed).toEqual([]);
    expect(n1.lastTrial).toBe(last);
    // A crash before the disarm repeats the step: counted once.
    expect(notArmed(n1, "again", AT)).toBe(n1);
    // The next attempt at the same release counts on; another release starts at 1.
    const a2 = armed(disarmed(n1), V2, "b", AT, "boot-2");
    expect(a2.trial?.attempt).toBe(2);
    expect(notArmed(a2, "cut", AT).noVerdict?.attempts).toBe(2);
    expect(armed(disarmed(n1), V1, "b", AT).trial?.attempt).toBe(1);
    // Shown armed: a verdict follows; the count is forgotten.
    const shown = armShown(a2, "2026-12-02T12:01:00Z");
    expect(shown.trial?.shownAt).toBe("2026-12-02T12:01:00Z");
    expect(shown.noVerdict).toBeUndefined();
    expect(armShown(shown, "later")).toBe(shown);
    // A new liken.sh/retry value forgets it too.
    expect(retried(n1, "r1").noVerdict).toBeUndefined();
    expect(notArmed(EMPTY_MEMORY, "x", AT)).toBe(EMPTY_MEMORY);
  });

  it("disarming: no longer shown armed before the bootloader is touched, and never counted", () => {
    const shown = armShown(armed(EMPTY_MEMORY, V2, "b", AT, "boot-1"), AT);
    const d = disarming(shown);
    expect(d.trial?.shownAt).toBeUndefined();
    expect(d.trial?.withdrawing).toBe(true);
    expect(disarming(d)).toBe(d);
    expect(notArmed(d, "a cut after the disarm", AT)).toBe(d);
    expect(disarmed(d).trial).toBeUndefined();
    expect(disarming(EMPTY_MEMORY)).toBe(EMPTY_MEMORY);
  });

  it("drained until the turn is given back", () => {
    expect(turnGivenBack(drained(EMPTY_MEMORY, V2.digest)).drainedDigest).toBeUndefined();
  });
});

describe("a trial's message is remembered within status.lastTrial's bound", () => {
  it("a slot check naming every mismatched artifact is cut where it is made", () => {
    const why = Array.from(
      { length: 30 },
      (_, i) => `artifact-${i}: sha256 ${"e".repeat(300)}`,
    ).join(", ");
    const m = skipped(EMPTY_MEMORY, V2, "b", AT, why);
    expect(m.lastTrial!.message!.length).toBeLessThanOrEqual(4096);
    expect(m.lastTrial!.message).toMatch(/^artifact-0: .*… and \d+ more characters$/);
    expect(m.lastTrial!.reason).toBe("SlotCheckMismatch");
  });
});
