// The EFI system partition as a FAT image file, made without mounting it (mkfs.vfat -C, then
// mtools), with GRUB or systemd-boot and liken's configuration (docs/machine.md, "GRUB" and
// "systemd-boot"). The installer and the QEMU testbed's disk (testbed/machine/) both make it here.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { BOOT_ARTIFACTS, slotBootDir } from "../bootloader/boot-files.js";
import { ENV_FILES } from "../bootloader/envstore.js";
import { grubConfig } from "../bootloader/grub-cfg.js";
import { initialEnvBlock } from "../bootloader/grub.js";
import { slotEntryId } from "../bootloader/systemd-boot.js";
import { InstallError } from "./errors.js";
import { run } from "./tools.js";

export type InstallBootloader = "grub" | "systemd-boot";
export const BOOTLOADERS: readonly InstallBootloader[] = ["grub", "systemd-boot"];

/** The ESP directory GRUB reads its config and environment from (the agent's envDir under the ESP's mount). */
export const GRUB_DIR = "EFI/liken";

/** GRUB's modules for liken's grub.cfg (docs/machine.md lists them), with a serial and video console. */
export const GRUB_MODULES = [
  "part_gpt",
  "fat",
  "ext2",
  "linux",
  "normal",
  "loadenv",
  "test",
  "echo",
  "serial",
  "terminal",
  "configfile",
  "search",
  "gzio",
  "efi_gop",
  "all_video",
  "reboot",
];

/** Debian's systemd-boot loader (package systemd-boot-efi). */
export const SYSTEMD_BOOT_EFI = "/usr/lib/systemd/boot/efi/systemd-bootx64.efi";

export interface KernelArgs {
  /** Arguments of every boot of slot `slot` (liken adds liken.slot= itself). */
  slot(slot: "a" | "b"): string;
  /** Added to a GRUB trial boot; systemd-boot has no trial-only arguments (docs/machine.md). */
  trial: string;
}

/**
 * The installer's default: the slot's root by label, and `panic=10` so that a panicking trial
 * reboots (into the default slot). `%s` in a --kernel-args value stands for the slot's letter.
 */
export const DEFAULT_KERNEL_ARGS = "root=PARTLABEL=liken-%s rw";
export const DEFAULT_TRIAL_ARGS = "panic=10";

export function kernelArgs(slotArgs: string, trial: string): KernelArgs {
  return { slot: (s) => slotArgs.replaceAll("%s", s), trial };
}

/** Writes the FAT image `img` of `sizeMiB` holding `files` (ESP path -> bytes). */
export function fatImage(
  img: string,
  sizeMiB: number,
  files: Record<string, Buffer | string>,
): void {
  run("mkfs.vfat", ["-C", "-n", "ESP", img, String(sizeMiB * 1024)]);
  const dirs = new Set<string>();
  for (const p of Object.keys(files)) {
    const parts = p.split("/").slice(0, -1);
    for (let i = 1; i <= parts.length; i++) dirs.add(parts.slice(0, i).join("/"));
  }
  const sorted = [...dirs].sort((x, y) => x.split("/").length - y.split("/").length);
  if (sorted.length > 0) run("mmd", ["-i", img, ...sorted.map((d) => `::/${d}`)]);
  const work = mkdtempSync(`${img}.files-`);
  try {
    let n = 0;
    for (const [p, data] of Object.entries(files)) {
      const tmp = join(work, `esp-file-${n++}`);
      writeFileSync(tmp, data);
      run("mcopy", ["-i", img, tmp, `::/${p}`]);
    }
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

/**
 * GRUB's ESP: BOOTX64.EFI from grub-mkimage with its prefix on the ESP (the first partition),
 * liken's grub.cfg loading each slot's /boot/vmlinuz and /boot/initrd.img from the slot's own
 * filesystem (partitions 2 and 3), and the two environment copies booting slot a.
 */
export function grubEspFiles(
  work: string,
  args: KernelArgs,
  serial: boolean,
): Record<string, Buffer | string> {
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
    args: args.slot(s),
  });
  const cfg = grubConfig({
    envDir: `(hd0,gpt1)/${GRUB_DIR}`,
    slots: { a: slot("a", 2), b: slot("b", 3) },
    trialArgs: args.trial,
    serial,
  });
  const env = initialEnvBlock("a");
  return {
    "EFI/BOOT/BOOTX64.EFI": readFileSync(efi),
    [`${GRUB_DIR}/grub.cfg`]: cfg,
    ...Object.fromEntries(ENV_FILES.map((f) => [`${GRUB_DIR}/${f}`, env])),
  };
}

/** A systemd-boot entry of slot `slot`: its own kernel and initrd on the ESP. */
export function systemdBootEntry(slot: "a" | "b", args: KernelArgs): string {
  return [
    `title liken slot ${slot}`,
    `linux /${slotBootDir(slot)}/${BOOT_ARTIFACTS.kernel}`,
    `initrd /${slotBootDir(slot)}/${BOOT_ARTIFACTS.initrd}`,
    `options ${[args.slot(slot), `liken.slot=${slot}`, args.trial].filter((s) => s !== "").join(" ")}`,
    "",
  ].join("\n");
}

// `default` covers the first boot, before anything sets LoaderEntryDefault (which wins from
// then on); timeout 0 boots at once.
export const LOADER_CONF = `default ${slotEntryId("a")}
timeout 0
editor no
`;

/**
 * systemd-boot's ESP: Debian's loader as the removable-media path, loader.conf, one entry per
 * slot named as the agent's backend expects, and the installed release's kernel and initrd in
 * both slots' directories (systemd-boot loads kernels only from the ESP). systemd-boot has no
 * trial-only arguments, so each entry carries the trial's (its `panic=N`).
 */
export function systemdBootEspFiles(
  args: KernelArgs,
  kernel: { vmlinuz: Buffer; initrd: Buffer },
): Record<string, Buffer | string> {
  let efi: Buffer;
  try {
    efi = readFileSync(SYSTEMD_BOOT_EFI);
  } catch (cause) {
    throw new InstallError(
      "LIKEN_INSTALL_TOOL_FAILED",
      `${SYSTEMD_BOOT_EFI} is missing (${(cause as Error).message}): install Debian's systemd-boot-efi on the host that installs`,
      { cause },
    );
  }
  return {
    "EFI/BOOT/BOOTX64.EFI": efi,
    "loader/loader.conf": LOADER_CONF,
    [`loader/entries/${slotEntryId("a")}`]: systemdBootEntry("a", args),
    [`loader/entries/${slotEntryId("b")}`]: systemdBootEntry("b", args),
    ...Object.fromEntries(
      (["a", "b"] as const).flatMap((s) => [
        [`${slotBootDir(s)}/${BOOT_ARTIFACTS.kernel}`, kernel.vmlinuz],
        [`${slotBootDir(s)}/${BOOT_ARTIFACTS.initrd}`, kernel.initrd],
      ]),
    ),
  };
}
