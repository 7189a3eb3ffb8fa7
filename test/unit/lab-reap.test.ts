// The lab's claim on .lab/lab.pid tells its own process from a later one with the same pid
// by the kernel start time; reap.ts relies on that to never take a stranger for the lab.
import { spawnSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import { isRunning, labProcesses, selfStamp, startTimeOf } from "../../src/lab/reap.js";

describe("lab process stamps", () => {
  it("know this process, and not a pid with another start time", () => {
    const me = selfStamp();
    expect(me.start).toMatch(/^\d+$/);
    expect(isRunning(me)).toBe(true);
    expect(isRunning({ pid: me.pid, start: String(Number(me.start) + 1) })).toBe(false);
  });

  it("say a process that ended is not running", () => {
    const r = spawnSync(process.execPath, ["-e", "0"]);
    expect(r.pid).toBeGreaterThan(0);
    expect(startTimeOf(r.pid)).toBeUndefined();
  });

  it("never count the caller among the lab's processes", () => {
    expect(labProcesses()).not.toContain(process.pid);
  });
});
