// buildMachineImages(): what the machine scenario boots (contract.ts). The slot images are
// built once for both bootloaders (releases.ts); the disk, whose ESP differs, once per
// bootloader. Both are cached under ~/.cache/liken/testbed/machine-*: a second build reads them.
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { cachedStage, dpkgVersion, hashFiles, MiB, newHash, run, short } from "./cache.js";
import type { MachineBootloader, MachineImages } from "./contract.js";
import { checkTable } from "../../src/install/install.js";
import { assembleDisk, partitionTable, type PartitionTable } from "./disk.js";
import { grubEsp } from "./esp-grub.js";
import { systemdBootEsp } from "./esp-systemd-boot.js";
import { buildSlots, type SlotSet } from "./releases.js";

export interface BuiltMachine extends MachineImages {
  /** Bytes of the disk, the slot images, the kernel, the initrd. */
  sizes: Record<string, number>;
  kernelPackage: string;
  /** Seconds spent building (0: everything came from the cache). */
  builtSeconds: number;
}

const SOURCES = [
  "images/machine/build.ts",
  "images/machine/disk.ts",
  "images/machine/esp.ts",
  "images/machine/esp-grub.ts",
  "images/machine/esp-systemd-boot.ts",
  "src/install/esp.ts",
  "src/install/layout.ts",
  "src/install/state.ts",
  "src/install/tools.ts",
  "src/bootloader/boot-files.ts",
  "src/bootloader/grub-cfg.ts",
  "src/bootloader/grub.ts",
  "src/bootloader/grubenv.ts",
  "src/bootloader/systemd-boot.ts",
];

const ESP_PACKAGES: Record<MachineBootloader, string> = {
  grub: "grub-efi-amd64-bin",
  "systemd-boot": "systemd-boot-efi",
};

/** A slot partition: the biggest release, and 64 MiB more for a release that grows. */
function slotMiB(slots: SlotSet): number {
  const biggest = Math.max(...slots.releases.map((r) => slots.sizes[r.version] ?? 0));
  return Math.ceil(biggest / MiB) + 64;
}

export async function buildMachineImages(
  bootloader: MachineBootloader,
  log: (s: string) => void = () => {},
): Promise<BuiltMachine> {
  const t0 = Date.now();
  const slots = await buildSlots(log);
  const h = hashFiles(newHash(`disk-${bootloader}`), SOURCES).update(slots.dir);
  h.update(`${ESP_PACKAGES[bootloader]}=${dpkgVersion(ESP_PACKAGES[bootloader])}`);
  const parts = partitionTable(slotMiB(slots));
  const stage = await cachedStage(bootloader, short(h), (work) => {
    const esp = join(work, "esp.fat");
    if (bootloader === "grub") grubEsp(work, esp);
    else systemdBootEsp(work, esp, slots);
    const disk = assembleDisk(work, parts, esp, slots.releases[0].slotImage);
    checkTable(disk, parts);
    writeFileSync(join(work, "parts.json"), JSON.stringify(parts));
  });
  const stored = JSON.parse(readFileSync(join(stage.dir, "parts.json"), "utf8")) as PartitionTable;
  const disk = join(stage.dir, "disk.img");
  const built = (Date.now() - t0) / 1000;
  const images: BuiltMachine = {
    bootloader,
    disk,
    partitions: stored,
    releases: slots.releases,
    sizes: { ...slots.sizes, disk: Number(run("stat", ["-c", "%s", disk]).trim()) },
    kernelPackage: slots.kernelPackage,
    builtSeconds: stage.built || slots.builtSeconds > 0 ? built : 0,
  };
  if (images.builtSeconds > 0) log(`machine: ${bootloader} images built in ${built.toFixed(1)} s`);
  return images;
}
