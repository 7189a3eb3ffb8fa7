// Loop devices for the native tests: whether this machine can attach one (root and the loop
// module), probed once, so a test that needs a block device is reported as skipped where it
// cannot run, never as passed.
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";

/** Attaches `file` to a free loop device and returns its path (/dev/loopN). */
export function attachLoop(file: string): string {
  return execFileSync("losetup", ["--find", "--show", file], {
    encoding: "utf8",
    stdio: ["ignore", "pipe", "ignore"],
  }).trim();
}

export function detachLoop(device: string): void {
  execFileSync("losetup", ["-d", device]);
}

function probe(): boolean {
  const dir = mkdtempSync(path.join(tmpdir(), "liken-loop-probe-"));
  try {
    const f = path.join(dir, "probe.img");
    writeFileSync(f, Buffer.alloc(1024 * 1024));
    detachLoop(attachLoop(f));
    return true;
  } catch {
    return false;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Whether a loop device can be attached here. */
export const loopAvailable: boolean = probe();
