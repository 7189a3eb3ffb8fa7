// The machine's disk: a raw GPT with the partitions docs/machine.md names by label: esp,
// liken-a (holding the installed release), liken-b (same size, empty) and liken-state (ext4 with
// an empty etc/, the directory bound onto /etc/liken). The layout, the table and the state
// filesystem are the installer's (src/install/): `liken machine image` makes disks the same way.
// Partitions are placed with dd conv=notrunc; no loop device, no mount.
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { planLayout, sgdiskArgs, type PartitionTable } from "../../src/install/layout.js";
import { stateFilesystem, writeStateTree } from "../../src/install/state.js";
import { place as placeFile, run } from "../../src/install/tools.js";
import { MiB } from "./cache.js";
import { ESP_MIB } from "./esp.js";
import { NODE_STATE_DIRS } from "./node.js";

/**
 * The state partition holds the node's containerd store: each image loaded at boot twice, as
 * its compressed layer and unpacked (the DRA test driver alone about 16 + 51 MB), plus the
 * kubelet's state and the pods' logs. 192 MiB leaves room above the kubelet's 2 % eviction
 * threshold; the disk file is sparse, so the unused part costs nothing.
 */
export const STATE_MIB = 192;

export type { PartitionTable };

/** Offsets and sizes (bytes) of the four partitions, for slots of `slotMiB`. */
export function partitionTable(slotMiB: number): PartitionTable {
  const req = { espMiB: ESP_MIB, slotMiB, stateMiB: STATE_MIB };
  return planLayout(req, 0);
}

/** Writes `src` into `disk` at byte `offset` (a multiple of 1 MiB), leaving the rest (unsynced: a cache file). */
export function place(disk: string, src: string, offset: number): void {
  placeFile(disk, src, offset, false);
}

/**
 * An ext4 state filesystem image holding `dir`'s files (or just an empty etc/), with the
 * directories the node's bind mounts need (node.ts).
 */
export function stateImage(img: string, dir: string): void {
  writeStateTree(dir, { dirs: NODE_STATE_DIRS });
  stateFilesystem(img, dir, STATE_MIB * MiB);
}

export function assembleDisk(
  work: string,
  parts: PartitionTable,
  esp: string,
  slotA: string,
): string {
  const disk = join(work, "disk.img");
  const end = parts["liken-state"].offset + parts["liken-state"].size;
  // 1 MiB after the last partition for the backup GPT.
  run("truncate", ["-s", String(end + MiB), disk]);
  run("sgdisk", [...sgdiskArgs(parts), disk]);
  place(disk, esp, parts.esp.offset);
  place(disk, slotA, parts["liken-a"].offset);
  const state = join(work, "state.ext4");
  mkdirSync(join(work, "state.d"), { recursive: true });
  stateImage(state, join(work, "state.d"));
  place(disk, state, parts["liken-state"].offset);
  return disk;
}
