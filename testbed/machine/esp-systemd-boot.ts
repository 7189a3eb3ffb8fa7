// The systemd-boot ESP of a machine, as the installer makes it (src/install/esp.ts;
// docs/machine.md, "systemd-boot"): Debian's systemd-boot EFI binary as the removable-media
// loader, loader.conf, one entry per slot named as the agent's backend expects, and each slot's
// kernel and initrd under liken/<slot>/, both v1's at the install. systemd-boot loads kernels
// only from the ESP: the agent copies a release's kernel and initrd into the other slot's
// directory before it arms the trial.
import { readFileSync } from "node:fs";
import { SYSTEMD_BOOT_EFI, systemdBootEntry, systemdBootEspFiles } from "../../src/install/esp.js";
import { fatImage, testbedArgs } from "./esp.js";

export { SYSTEMD_BOOT_EFI };

/**
 * systemd-boot has no trial-only arguments: every entry carries panic=3, so a panicking trial
 * reboots and, with no tries left on its entry, the default boots.
 */
const ARGS = testbedArgs("panic=3");

export function entry(slot: "a" | "b"): string {
  return systemdBootEntry(slot, ARGS);
}

export function systemdBootEsp(
  work: string,
  img: string,
  /** The installed release's (v1's) kernel and initrd, in both slots' directories. */
  kernel: { vmlinuz: string; initrd: string },
): void {
  fatImage(
    work,
    img,
    systemdBootEspFiles(ARGS, {
      vmlinuz: readFileSync(kernel.vmlinuz),
      initrd: readFileSync(kernel.initrd),
    }),
  );
}
