// The lab's service gate (src/lab/health-gate.ts) run for real with sh on files laid out as
// a lab machine's: it passes on a good release, and on a bad-after-promotion one until that
// boot is an hour old on the lab's clock.
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterEach, describe, expect, it } from "vitest";
import { labServiceGate, moveLabClock } from "../../src/lab/health-gate.js";
import { labKernel, type LabKernelBehaviour } from "../../src/lab/releases.js";

const run = promisify(execFile);
const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** A machine directory booted from slot b holding a kernel that behaves as `b`. */
function machineDir(b: LabKernelBehaviour): { dir: string; clock: string } {
  const dir = mkdtempSync(path.join(os.tmpdir(), "lab-gate-"));
  dirs.push(dir);
  writeFileSync(path.join(dir, "cmdline"), "liken.slot=b\n");
  writeFileSync(path.join(dir, "boot_id"), "0f0f\n");
  writeFileSync(path.join(dir, "slot-a.img"), labKernel("v1", "ok", 4096));
  writeFileSync(path.join(dir, "slot-b.img"), labKernel("v2", b, 4096));
  return { dir, clock: path.join(dir, "clock") };
}

async function gate(dir: string, clock: string): Promise<{ code: number; out: string }> {
  const [cmd, ...args] = labServiceGate(dir, clock).command;
  try {
    const r = await run(cmd!, args);
    return { code: 0, out: r.stdout };
  } catch (e) {
    const x = e as { code: number; stdout: string };
    return { code: x.code, out: x.stdout };
  }
}

describe("the lab's service gate", () => {
  it.each([
    ["a good release, the clock an hour on", "ok", 3600, 0],
    ["bad-after-promotion, just booted", "bad-after-promotion", 0, 0],
    ["bad-after-promotion, 59 minutes on", "bad-after-promotion", 3540, 0],
    ["bad-after-promotion, an hour on", "bad-after-promotion", 3600, 1],
  ] as const)("%s: exit %i", async (_, b, offset, code) => {
    const { dir, clock } = machineDir(b);
    if (offset > 0) moveLabClock(offset, clock);
    const r = await gate(dir, clock);
    expect(r.code).toBe(code);
    if (code === 1) expect(r.out).toMatch(/^service: packets dropped under load, 36\d\d s after/);
  });

  it("the lab's clock moves forward only", () => {
    const { clock } = machineDir("ok");
    expect(moveLabClock(60, clock)).toBe(60);
    expect(moveLabClock(3600, clock)).toBe(3660);
    expect(() => moveLabClock(-5, clock)).toThrow(/forward only/);
  });
});
