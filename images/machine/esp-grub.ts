// The GRUB ESP of a machine, as images/build.ts makes the testbed's (docs/machine.md, "GRUB"):
// BOOTX64.EFI from grub-mkimage with its prefix on the ESP, liken's grub.cfg (grubConfig()),
// the two environment copies (initialEnvBlock("a")). The slots are the real root filesystems:
// GRUB loads each slot's /boot/vmlinuz and /boot/initrd.img.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { GRUB_MODULES } from "../build.js";
import { grubConfig } from "../../src/bootloader/grub-cfg.js";
import { initialEnvBlock } from "../../src/bootloader/grub.js";
import { ENV_FILES } from "../../src/bootloader/envstore.js";
import { run } from "./cache.js";
import { fatImage, slotArgs, TRIAL_ARGS } from "./esp.js";

/** The ESP directory GRUB reads its config and environment from; the agent's envDir under /boot/efi. */
export const GRUB_DIR = "EFI/liken";

export function grubEsp(work: string, img: string): void {
  const efi = join(work, "grubx64.efi");
  run("grub-mkimage", [
    "-O",
    "x86_64-efi",
    "-o",
    efi,
    "-p",
    `(hd0,gpt1)/${GRUB_DIR}`,
    ...GRUB_MODULES,
  ]);
  const slot = (s: "a" | "b", part: number) => ({
    root: `(hd0,gpt${part})`,
    kernel: "/boot/vmlinuz",
    initrd: "/boot/initrd.img",
    args: slotArgs(s),
  });
  const cfg = grubConfig({
    envDir: `(hd0,gpt1)/${GRUB_DIR}`,
    slots: { a: slot("a", 2), b: slot("b", 3) },
    trialArgs: TRIAL_ARGS,
    serial: true,
  });
  const env = initialEnvBlock("a");
  fatImage(work, img, {
    "EFI/BOOT/BOOTX64.EFI": readFileSync(efi),
    [`${GRUB_DIR}/grub.cfg`]: cfg,
    ...Object.fromEntries(ENV_FILES.map((f) => [`${GRUB_DIR}/${f}`, env])),
  });
}
