// A loop device over a file, for the cases that need a real block device (a fixed size read
// through BLKGETSIZE64, O_DIRECT on a block device). It needs root and the loop module; where
// either is missing the test says why it did not run the device case and returns, and its
// file-backed sibling still covers the logic.
import { execFileSync } from "node:child_process";
import type { TestContext } from "vitest";

export async function withLoopDevice(
  file: string,
  ctx: TestContext,
  use: (device: string) => Promise<void> | void,
): Promise<void> {
  let loop = "";
  try {
    loop = execFileSync("losetup", ["--find", "--show", file], { encoding: "utf8" }).trim();
  } catch {
    await ctx.annotate("no loop device available here; block-device case not exercised");
    return;
  }
  try {
    await use(loop);
  } finally {
    execFileSync("losetup", ["-d", loop]);
  }
}
