// The machine's disk: a raw GPT (sgdisk on a plain file) with the partitions docs/machine.md
// names by label: esp, liken-a (holding the installed release), liken-b (same size, empty) and
// liken-state (ext4 with an empty etc/, the directory bound onto /etc/liken). Partitions are
// placed with dd conv=notrunc; no loop device, no mount.
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import type { MachinePartition } from "./contract.js";
import { MiB, run } from "./cache.js";
import { ESP_MIB } from "./esp.js";
import { NODE_STATE_DIRS } from "./node.js";

/**
 * The state partition holds the node's containerd store: each image loaded at boot twice, as
 * its compressed layer and unpacked (the DRA test driver alone about 16 + 51 MB), plus the
 * kubelet's state and the pods' logs. 192 MiB leaves room above the kubelet's 2 % eviction
 * threshold; the disk file is sparse, so the unused part costs nothing.
 */
export const STATE_MIB = 192;

export type PartitionTable = Record<MachinePartition, { offset: number; size: number }>;

/** Offsets and sizes (bytes) of the four partitions, for slots of `slotMiB`. */
export function partitionTable(slotMiB: number): PartitionTable {
  const esp = { offset: 1 * MiB, size: ESP_MIB * MiB };
  const a = { offset: esp.offset + esp.size, size: slotMiB * MiB };
  const b = { offset: a.offset + a.size, size: slotMiB * MiB };
  const state = { offset: b.offset + b.size, size: STATE_MIB * MiB };
  return { esp, "liken-a": a, "liken-b": b, "liken-state": state };
}

/** Writes `src` into `disk` at byte `offset` (a multiple of 1 MiB), leaving the rest. */
export function place(disk: string, src: string, offset: number): void {
  run("dd", [
    `if=${src}`,
    `of=${disk}`,
    "bs=1M",
    `seek=${offset / MiB}`,
    "conv=notrunc",
    "status=none",
  ]);
}

/**
 * An ext4 state filesystem image holding `dir`'s files (or just an empty etc/), with the
 * directories the node's bind mounts need (node.ts).
 */
export function stateImage(img: string, dir: string): void {
  for (const d of ["etc", ...NODE_STATE_DIRS]) mkdirSync(join(dir, d), { recursive: true });
  run("mke2fs", [
    "-q",
    "-t",
    "ext4",
    "-L",
    "liken-state",
    "-m",
    "0",
    "-d",
    dir,
    img,
    `${STATE_MIB}M`,
  ]);
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
  const n = (i: number, p: { size: number }, type: string, name: string): string[] => [
    "-n",
    `${i}:0:+${p.size / MiB}M`,
    "-t",
    `${i}:${type}`,
    "-c",
    `${i}:${name}`,
  ];
  run("sgdisk", [
    "-o",
    ...n(1, parts.esp, "ef00", "esp"),
    ...n(2, parts["liken-a"], "8300", "liken-a"),
    ...n(3, parts["liken-b"], "8300", "liken-b"),
    ...n(4, parts["liken-state"], "8300", "liken-state"),
    disk,
  ]);
  place(disk, esp, parts.esp.offset);
  place(disk, slotA, parts["liken-a"].offset);
  const state = join(work, "state.ext4");
  stateImage(state, join(work, "state.d"));
  place(disk, state, parts["liken-state"].offset);
  return disk;
}
