// A loop device over a file, for the cases that need a real block device (a fixed size read
// through BLKGETSIZE64, O_DIRECT on a block device). It needs root and the loop module: whether
// this machine can attach one is probed once, so such a case is reported as skipped where it
// cannot run (`it.skipIf(!loopAvailable)`), never as passed; its file-backed sibling still
// covers the logic.
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";

function attach(file: string): string {
  return execFileSync("losetup", ["--find", "--show", file], {
    encoding: "utf8",
    stdio: ["ignore", "pipe", "ignore"],
  }).trim();
}

function detach(device: string): void {
  execFileSync("losetup", ["-d", device]);
}

/** Runs `use` with `file` attached to a loop device, and detaches it after. */
export async function withLoopDevice(
  file: string,
  use: (device: string) => Promise<void> | void,
): Promise<void> {
  const loop = attach(file);
  try {
    await use(loop);
  } finally {
    detach(loop);
  }
}

function probe(): boolean {
  const dir = mkdtempSync(path.join(tmpdir(), "liken-loop-probe-"));
  try {
    const f = path.join(dir, "probe.img");
    writeFileSync(f, Buffer.alloc(1024 * 1024));
    detach(attach(f));
    return true;
  } catch {
    return false;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Whether a loop device can be attached here. */
export const loopAvailable: boolean = probe();
