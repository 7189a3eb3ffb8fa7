// The machine's initrd: busybox-static, testbed/machine/init.sh as /init and the kernel modules
// of kernel.ts with their load order, as a newc cpio (testbed/cpio.ts). Every release has its own
// initrd, alike but for etc/liken-initrd-version, which /init prints first on the console: the
// scenario sees whose initrd booted (on systemd-boot, the one the agent put on the ESP).
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { cpioNewc, type CpioEntry } from "../cpio.js";
import { ROOT } from "./cache.js";
import type { GuestKernel } from "./kernel.js";

/** Where /init reads the release it was built for. */
export const INITRD_VERSION_FILE = "etc/liken-initrd-version";

export function machineInitrd(kernel: GuestKernel, version: string): Buffer {
  const dirs = ["bin", "dev", "etc", "lib", "lib/modules", "proc", "sys", "newroot"];
  const entries: CpioEntry[] = [
    ...dirs.map((d): CpioEntry => ({ path: d, kind: "dir" })),
    { path: "dev/console", kind: "chardev", major: 5, minor: 1 },
    { path: "bin/busybox", kind: "file", data: readFileSync("/bin/busybox"), mode: 0o755 },
    {
      path: "init",
      kind: "file",
      data: readFileSync(join(ROOT, "testbed/machine/init.sh")),
      mode: 0o755,
    },
    { path: INITRD_VERSION_FILE, kind: "file", data: Buffer.from(`${version}\n`) },
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
