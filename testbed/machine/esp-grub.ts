// The GRUB ESP of a machine, as the installer makes it (src/install/esp.ts; docs/machine.md,
// "GRUB"): BOOTX64.EFI from grub-mkimage with its prefix on the ESP, liken's grub.cfg, the two
// environment copies booting slot a. The slots are the real root filesystems: GRUB loads each
// slot's /boot/vmlinuz and /boot/initrd.img.
import { GRUB_DIR, grubEspFiles } from "../../src/install/esp.js";
import { fatImage, testbedArgs, TRIAL_ARGS } from "./esp.js";

export { GRUB_DIR };

export function grubEsp(work: string, img: string): void {
  fatImage(work, img, grubEspFiles(work, testbedArgs(TRIAL_ARGS), true));
}
