// The machine's disk: a raw GPT with the partitions docs/machine.md names by label: esp,
// liken-a (holding the installed release), liken-b (same size, empty) and liken-state (ext4,
// the directory bound onto /etc/liken), made by `liken machine image` (src/install/). The
// scenario's state filesystem replaces the installer's before the first boot (state.ts).
// Partitions are placed with dd conv=notrunc; no loop device, no mount.
import { installMachine } from "../../src/install/install.js";
import { planLayout, type PartitionTable } from "../../src/install/layout.js";
import { stateFilesystem, writeStateTree } from "../../src/install/state.js";
import { place as placeFile } from "../../src/install/tools.js";
import { MiB } from "./cache.js";
import type { MachineBootloader } from "./contract.js";
import { ESP_MIB, slotArgs, TRIAL_ARGS } from "./esp.js";
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

/**
 * The machine's disk file, made by \`liken machine image\` (its code, installMachine) from the
 * installed release's directory: the partition table, the ESP with the testbed's kernel
 * arguments (a serial console; GRUB's trial adds TRIAL_ARGS, systemd-boot's entries carry
 * panic=3), v1 into slot a through the verifying writer. Its state partition holds a placeholder
 * identity: the scenario writes the real one before the first boot (state.ts).
 */
export async function machineImage(o: {
  disk: string;
  bootloader: MachineBootloader;
  release: string;
  slotMiB: number;
  log: (s: string) => void;
}): Promise<PartitionTable> {
  const r = await installMachine({
    target: o.disk,
    mode: "image",
    espMiB: ESP_MIB,
    slotMiB: o.slotMiB,
    stateMiB: STATE_MIB,
    bootloader: o.bootloader,
    release: { dir: o.release },
    cluster: "liken-machine",
    machine: "liken-machine",
    credential: { kind: "bootstrap", kubeconfig: PLACEHOLDER_KUBECONFIG },
    kernelArgs: slotArgs("%s"),
    trialArgs: o.bootloader === "grub" ? TRIAL_ARGS : "panic=3",
    serial: true,
    wipe: false,
    log: (l) => o.log(`machine image: ${l}`),
  });
  return r.layout;
}

/** The state partition's credential until the scenario writes its own (state.ts). */
const PLACEHOLDER_KUBECONFIG = `# placeholder: the machine scenario writes the fleet's bootstrap kubeconfig here
apiVersion: v1
kind: Config
clusters: []
contexts: []
users: []
`;
