// The disk's layout, decided before a byte is written (pure): the four partitions of
// docs/machine.md by label, in this order, each aligned to 1 MiB, and what the disk must hold.
//   1 esp          EF00  FAT, the bootloader and its state
//   2 liken-a      8300  slot a: the installed release
//   3 liken-b      8300  slot b: same size, empty until the first update
//   4 liken-state  8300  ext4: /var/lib/liken and the machine's own /etc/liken
// The agent finds them by label (/dev/disk/by-partlabel/liken-a...), never by number.

export const MiB = 1024 * 1024;

export const PARTITIONS = ["esp", "liken-a", "liken-b", "liken-state"] as const;
export type PartitionName = (typeof PARTITIONS)[number];
export type PartitionTable = Record<PartitionName, { offset: number; size: number }>;

/** GPT type codes (sgdisk's short form). */
export const PARTITION_TYPES: Record<PartitionName, string> = {
  esp: "ef00",
  "liken-a": "8300",
  "liken-b": "8300",
  "liken-state": "8300",
};

/** The first partition starts at 1 MiB (the primary GPT and alignment); the backup GPT takes the last 1 MiB. */
const HEAD = MiB;
const TAIL = MiB;

/**
 * The state partition's floor: the agent's markers and release documents take kilobytes, the
 * machine's identity less; a node's containerd store and kubelet state take the rest (the QEMU
 * testbed's node fits 192 MiB). Below 64 MiB ext4's own journal and tables crowd it.
 */
export const MIN_STATE_MIB = 64;

export interface LayoutRequest {
  espMiB: number;
  slotMiB: number;
  /** Absent: the rest of the disk (at least MIN_STATE_MIB). */
  stateMiB?: number;
}

/** Bytes a disk must hold for `r` (with the state partition at its floor when it takes the rest). */
export function bytesNeeded(r: LayoutRequest): number {
  return HEAD + (r.espMiB + 2 * r.slotMiB + (r.stateMiB ?? MIN_STATE_MIB)) * MiB + TAIL;
}

/** Offsets and sizes (bytes) of the four partitions on a disk of `diskBytes`. */
export function planLayout(r: LayoutRequest, diskBytes: number): PartitionTable {
  const esp = { offset: HEAD, size: r.espMiB * MiB };
  const a = { offset: esp.offset + esp.size, size: r.slotMiB * MiB };
  const b = { offset: a.offset + a.size, size: r.slotMiB * MiB };
  const rest = Math.floor((diskBytes - TAIL - (b.offset + b.size)) / MiB) * MiB;
  const state = {
    offset: b.offset + b.size,
    size: r.stateMiB !== undefined ? r.stateMiB * MiB : rest,
  };
  return { esp, "liken-a": a, "liken-b": b, "liken-state": state };
}

/** A disk image's size for `r`: exactly what the partitions and both GPT copies take. */
export function imageBytes(r: LayoutRequest & { stateMiB: number }): number {
  return bytesNeeded(r);
}

/** sgdisk's arguments that write a new GPT with the four partitions of `t` (to append: the disk). */
export function sgdiskArgs(t: PartitionTable): string[] {
  return [
    "-o",
    ...PARTITIONS.flatMap((name, i) => {
      const n = i + 1;
      const first = t[name].offset / 512;
      const last = (t[name].offset + t[name].size) / 512 - 1;
      return [
        "-n",
        `${n}:${first}:${last}`,
        "-t",
        `${n}:${PARTITION_TYPES[name]}`,
        "-c",
        `${n}:${name}`,
      ];
    }),
  ];
}

/** Reads `sgdisk -i N` output back: where partition N is and what it is called. */
export function parsePartitionInfo(info: string): { offset: number; size: number; label: string } {
  const first = Number(/First sector: (\d+)/.exec(info)?.[1]);
  const last = Number(/Last sector: (\d+)/.exec(info)?.[1]);
  return {
    offset: first * 512,
    size: (last + 1 - first) * 512,
    label: /Partition name: '([^']*)'/.exec(info)?.[1] ?? "",
  };
}
