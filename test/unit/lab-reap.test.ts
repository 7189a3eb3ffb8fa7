// The lab's claim on .lab/lab.pid tells its own process from a later one with the same pid
// by the kernel start time; reap.ts relies on that to never take a stranger for the lab.
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { LAB_RUN_DIR } from "../../src/lab/paths.js";
import {
  claimLab,
  isRunning,
  labProcesses,
  readClaim,
  releaseClaim,
  selfStamp,
  startTimeOf,
} from "../../src/lab/reap.js";
import { waitFor } from "../support/kube.js";

describe("the lab's claim", () => {
  it("is written on a fresh clone, where .lab/ does not exist yet", () => {
    const root = mkdtempSync(path.join(tmpdir(), "liken-claim-"));
    try {
      const file = path.join(root, ".lab", "lab.pid");
      claimLab(file);
      expect(readClaim(file)).toEqual(selfStamp());
      releaseClaim(selfStamp(), file);
      expect(readClaim(file)).toBeUndefined();
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});

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

  it("count a node process that names the lab's files, not a person's tail of its logs", async () => {
    const file = path.join(LAB_RUN_DIR, "machines", "node-9", "agent.yaml");
    // Both stay until their stdin (this test's pipe) closes: killed in `finally`, or gone with
    // the test runner, never on a timer of their own.
    const node = spawn(process.execPath, ["-e", "process.stdin.resume()", file]);
    // A shell that names the file as its $0 and stays (the `; :` keeps it from exec'ing cat).
    const tail = spawn("sh", ["-c", "cat >/dev/null; :", file]);
    try {
      await waitFor("both to run", async () =>
        [node.pid, tail.pid].every((p) => p !== undefined && startTimeOf(p) !== undefined),
      );
      const found = labProcesses();
      expect(found).toContain(node.pid);
      expect(found).not.toContain(tail.pid);
    } finally {
      node.kill("SIGKILL");
      tail.kill("SIGKILL");
    }
  });
});
