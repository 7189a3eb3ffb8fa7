// A FAT EFI system partition image made without mounting it: mkfs.vfat -C, then mtools.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { run } from "./cache.js";

/**
 * The ESP's size: systemd-boot and each slot's kernel (~8 MiB) and initrd (~2 MiB), with room
 * for a release whose kernel grows (the agent replaces the other slot's in place).
 */
export const ESP_MIB = 64;

/** Kernel arguments of every boot of slot `slot` (liken adds liken.slot= itself in GRUB). */
export function slotArgs(slot: "a" | "b"): string {
  // no_timer_check: on a host starved of CPU the IO-APIC timer check under TCG fails and
  // panics at boot (images/build.ts). systemd.gpt_auto=0: the fstab says what to mount.
  // loglevel=3: the kernel's own messages on the serial console cost seconds under TCG;
  // systemd's status lines ("Started liken-agent.service") and panics still show.
  return `root=PARTLABEL=liken-${slot} rw console=ttyS0,115200 loglevel=3 no_timer_check systemd.gpt_auto=0`;
}

/** What a trial boot adds: a panic reboots (into the default), after 3 s. */
export const TRIAL_ARGS = "liken.trial=1 panic=3";

/** Writes the FAT image `img` holding `files` (ESP path -> bytes). */
export function fatImage(work: string, img: string, files: Record<string, Buffer | string>): void {
  run("mkfs.vfat", ["-C", "-n", "ESP", img, String(ESP_MIB * 1024)]);
  const dirs = new Set<string>();
  for (const p of Object.keys(files)) {
    const parts = p.split("/").slice(0, -1);
    for (let i = 1; i <= parts.length; i++) dirs.add(parts.slice(0, i).join("/"));
  }
  const sorted = [...dirs].sort((x, y) => x.split("/").length - y.split("/").length);
  if (sorted.length > 0) run("mmd", ["-i", img, ...sorted.map((d) => `::/${d}`)]);
  let n = 0;
  for (const [p, data] of Object.entries(files)) {
    const tmp = join(work, `esp-file-${n++}`);
    writeFileSync(tmp, data);
    run("mcopy", ["-i", img, tmp, `::/${p}`]);
  }
}
