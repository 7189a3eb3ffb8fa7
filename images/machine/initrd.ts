// The machine's initrd: busybox-static, images/machine/init.sh as /init and the kernel modules
// of kernel.ts with their load order, as a newc cpio (images/cpio.ts). Every release boots the
// same kernel and initrd; the release is in the root filesystem the initrd mounts.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { cpioNewc, type CpioEntry } from "../cpio.js";
import { ROOT } from "./cache.js";
import type { GuestKernel } from "./kernel.js";

export function machineInitrd(kernel: GuestKernel): Buffer {
  const dirs = ["bin", "dev", "etc", "lib", "lib/modules", "proc", "sys", "newroot"];
  const entries: CpioEntry[] = [
    ...dirs.map((d): CpioEntry => ({ path: d, kind: "dir" })),
    { path: "dev/console", kind: "chardev", major: 5, minor: 1 },
    { path: "bin/busybox", kind: "file", data: readFileSync("/bin/busybox"), mode: 0o755 },
    {
      path: "init",
      kind: "file",
      data: readFileSync(join(ROOT, "images/machine/init.sh")),
      mode: 0o755,
    },
    {
      path: "lib/modules/order",
      kind: "file",
      data: Buffer.from(kernel.modules.map((m) => m.name).join("\n") + "\n"),
    },
    ...kernel.modules.map((m): CpioEntry => ({
      path: `lib/modules/${m.name}.ko`,
      kind: "file",
      data: m.ko,
    })),
  ];
  return cpioNewc(entries);
}
