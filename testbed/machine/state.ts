// What is per machine, on the state partition of a copy of the machine's disk: the agent's
// config and identity (/var/lib/liken/etc, bound onto /etc/liken) and, as the factory install
// leaves it, the marker and release document of the release in slot a, so the agent knows from
// its first boot which release runs. Written as a fresh ext4 image (mke2fs -d) into the
// partition's bytes: the disk copy is never mounted.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { stringify } from "yaml";
import {
  agentYaml,
  MACHINE_BOOTSTRAP_KUBECONFIG,
  MACHINE_IDENTITY_KUBECONFIG,
  MACHINE_KUBECONFIG,
  writeStateTree,
} from "../../src/install/state.js";
import type { MachineBootloader, MachineIdentity, MachineImages } from "./contract.js";
import { place, stateImage } from "./disk.js";
import { writeNodeFiles, type NodeFiles } from "./node.js";

/** Where the guest reads them (the bind mount of docs/machine.md). */
export const GUEST_CONFIG = "/etc/liken/agent.yaml";
export const GUEST_KUBECONFIG = MACHINE_KUBECONFIG;
/** The fleet's bootstrap credential, and where the agent writes the kubeconfig of its own. */
export const GUEST_BOOTSTRAP_KUBECONFIG = MACHINE_BOOTSTRAP_KUBECONFIG;
export const GUEST_IDENTITY_KUBECONFIG = MACHINE_IDENTITY_KUBECONFIG;

/** The release the factory wrote into slot a, as `liken release build` published it. */
export interface InstalledRelease {
  version: string;
  /** The catalog's digest of its release document. */
  digest: string;
  /** release.yaml, byte for byte. */
  document: Buffer | string;
}

/**
 * How long a trial may take to rejoin (the agent's default is 15 min): the trial boot's kubelet
 * was seen Ready 20-40 s after its agent started under TCG on a loaded 2-core host, and the
 * trial promoted 8 to 9 s after its agent's READY=1 at load average 13 to 22 (2026-12-05); 120 s
 * leaves three times the slowest seen. It is also how long the kubelet-down release's trial
 * waits before it falls back, on the QEMU tier's longer run (it was 180 s).
 */
export const GUEST_PROVE_MS = 120_000;

/** The guest's /etc/liken/agent.yaml: the installer's (docs/agent.md lists every field), with the testbed's timeouts. */
export function agentConfigYaml(identity: MachineIdentity, bootloader: MachineBootloader): string {
  return stringify(
    agentYaml(
      {
        machine: identity.machine,
        cluster: identity.cluster,
        bootloader,
        credential: identity.bootstrap === true ? "bootstrap" : "kubeconfig",
      },
      { timeouts: { proveMs: GUEST_PROVE_MS }, direct: true },
    ),
  );
}

/**
 * Puts the machine's identity (and the installed release's marker, when given, and the node's
 * files: the kubelet's kubeconfig and settings) onto the liken-state partition of `diskCopy`, a
 * copy of images.disk, replacing what was there.
 */
export function writeStatePartition(
  diskCopy: string,
  images: MachineImages,
  identity: MachineIdentity,
  installed?: InstalledRelease,
  node?: NodeFiles,
): void {
  const work = mkdtempSync(join(tmpdir(), "liken-machine-state-"));
  try {
    const dir = join(work, "state");
    writeStateTree(dir, {
      agentYaml: agentConfigYaml(identity, images.bootloader),
      credential: {
        file: identity.bootstrap === true ? "bootstrap-kubeconfig" : "kubeconfig",
        text: identity.kubeconfig,
      },
      ...(installed === undefined
        ? {}
        : { installed: { ...installed, document: installed.document, verifiedAt: new Date() } }),
    });
    if (node !== undefined) writeNodeFiles(dir, node);
    const img = join(work, "state.ext4");
    stateImage(img, dir);
    place(diskCopy, img, images.partitions["liken-state"].offset);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}
