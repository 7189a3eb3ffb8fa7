// buildMachineImages(): what the machine scenario boots (contract.ts). The releases are built
// once for both bootloaders (releases.ts: Containerfiles, buildah, `--from-image`); the disk,
// whose ESP differs, once per bootloader, by `liken machine image` (disk.ts). Both are cached
// under ~/.cache/liken/testbed/machine-*: a second build reads them.
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  cachedStage,
  dpkgVersion,
  filesUnder,
  hashFiles,
  MiB,
  newHash,
  run,
  short,
} from "./cache.js";
import type { MachineBootloader, MachineImages } from "./contract.js";
import type { PartitionTable } from "../../src/install/layout.js";
import { machineImage } from "./disk.js";
import { buildSlots, RELEASE_VERSIONS, type SlotSet } from "./releases.js";

export interface BuiltMachine extends MachineImages {
  /** Bytes of the disk, the slot images, the kernel, the initrd. */
  sizes: Record<string, number>;
  kernelPackage: string;
  /** Seconds spent building (0: everything came from the cache). */
  builtSeconds: number;
}

const SOURCES = [
  "testbed/machine/build.ts",
  "testbed/machine/disk.ts",
  "testbed/machine/esp.ts",
  "testbed/machine/esp-grub.ts",
  "testbed/machine/esp-systemd-boot.ts",
  ...filesUnder("src/install"),
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
  const stage = await cachedStage(bootloader, short(h), async (work) => {
    const parts = await machineImage({
      disk: join(work, "disk.img"),
      bootloader,
      release: join(slots.channel, RELEASE_VERSIONS[0]),
      slotMiB: slotMiB(slots),
      log,
    });
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
