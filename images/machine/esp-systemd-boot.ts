// The systemd-boot ESP of a machine (docs/machine.md, "systemd-boot"): Debian's systemd-boot
// EFI binary as the removable-media loader, loader.conf, one entry per slot named as the
// agent's backend expects (src/bootloader/systemd-boot.ts: liken-a.conf, liken-b.conf), and each
// slot's kernel and initrd under liken/<slot>/ (src/bootloader/boot-files.ts), both v1's at the
// install. systemd-boot loads kernels only from the ESP: the agent copies a release's kernel and
// initrd into the other slot's directory before it arms the trial.
import { readFileSync } from "node:fs";
import { BOOT_ARTIFACTS, slotBootDir } from "../../src/bootloader/boot-files.js";
import { slotEntryId } from "../../src/bootloader/systemd-boot.js";
import { fatImage, slotArgs } from "./esp.js";

export const SYSTEMD_BOOT_EFI = "/usr/lib/systemd/boot/efi/systemd-bootx64.efi";

/**
 * systemd-boot has no trial-only arguments: every entry carries panic=3, so a panicking trial
 * reboots and, with no tries left on its entry, the default boots.
 */
export function entry(slot: "a" | "b"): string {
  return [
    `title liken slot ${slot}`,
    `linux /${slotBootDir(slot)}/${BOOT_ARTIFACTS.kernel}`,
    `initrd /${slotBootDir(slot)}/${BOOT_ARTIFACTS.initrd}`,
    `options ${slotArgs(slot)} liken.slot=${slot} panic=3`,
    "",
  ].join("\n");
}

// `default` covers the first boot, before the machine's first-boot step sets
// LoaderEntryDefault (which wins from then on); timeout 0 boots at once.
const LOADER_CONF = `default ${slotEntryId("a")}
timeout 0
editor no
`;

export function systemdBootEsp(
  work: string,
  img: string,
  /** The installed release's (v1's) kernel and initrd, in both slots' directories. */
  kernel: { vmlinuz: string; initrd: string },
): void {
  let efi: Buffer;
  try {
    efi = readFileSync(SYSTEMD_BOOT_EFI);
  } catch (e) {
    throw new Error(
      `${SYSTEMD_BOOT_EFI} is missing (${(e as Error).message}): run images/setup-debian.sh (it installs systemd-boot-efi)`,
    );
  }
  fatImage(work, img, {
    "EFI/BOOT/BOOTX64.EFI": efi,
    "loader/loader.conf": LOADER_CONF,
    [`loader/entries/${slotEntryId("a")}`]: entry("a"),
    [`loader/entries/${slotEntryId("b")}`]: entry("b"),
    ...Object.fromEntries(
      (["a", "b"] as const).flatMap((s) => [
        [`${slotBootDir(s)}/${BOOT_ARTIFACTS.kernel}`, readFileSync(kernel.vmlinuz)],
        [`${slotBootDir(s)}/${BOOT_ARTIFACTS.initrd}`, readFileSync(kernel.initrd)],
      ]),
    ),
  });
}
