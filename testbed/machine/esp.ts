// The testbed's ESP: the installer's FAT image (src/install/esp.ts), with the kernel arguments
// the QEMU guest needs (a serial console, no timer check under TCG).
import { fatImage as installFatImage, kernelArgs, type KernelArgs } from "../../src/install/esp.js";

/**
 * The ESP's size: systemd-boot and each slot's kernel (~8 MiB) and initrd (~2 MiB), with room
 * for a release whose kernel grows (the agent replaces the other slot's in place).
 */
export const ESP_MIB = 64;

/** Kernel arguments of every boot of slot `slot` (liken adds liken.slot= itself in GRUB). */
export function slotArgs(slot: string): string {
  // no_timer_check: on a host starved of CPU the IO-APIC timer check under TCG fails and
  // panics at boot (testbed/build.ts). systemd.gpt_auto=0: the fstab says what to mount.
  // loglevel=3: the kernel's own messages on the serial console cost seconds under TCG;
  // systemd's status lines ("Started liken-agent.service") and panics still show.
  return `root=PARTLABEL=liken-${slot} rw console=ttyS0,115200 loglevel=3 no_timer_check systemd.gpt_auto=0`;
}

/** What a trial boot adds: a panic reboots (into the default), after 3 s. */
export const TRIAL_ARGS = "liken.trial=1 panic=3";

/** The testbed's arguments; systemd-boot has no trial-only ones, each entry carries panic=3. */
export function testbedArgs(trial: string): KernelArgs {
  return kernelArgs(slotArgs("%s"), trial);
}

/** Writes the FAT image `img` holding `files` (ESP path -> bytes). */
export function fatImage(_work: string, img: string, files: Record<string, Buffer | string>): void {
  installFatImage(img, ESP_MIB, files);
}
