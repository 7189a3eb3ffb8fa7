// What is per machine, on the state partition of a copy of the machine's disk: the agent's
// config and identity (/var/lib/liken/etc, bound onto /etc/liken) and, as the factory install
// leaves it, the marker and release document of the release in slot a, so the agent knows from
// its first boot which release runs. Written as a fresh ext4 image (mke2fs -d) into the
// partition's bytes: the disk copy is never mounted.
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { stringify } from "yaml";
import type { AgentYaml } from "../../src/agent/config-schema.js";
import { encodeMarker } from "../../src/slots/marker.js";
import type { MachineBootloader, MachineIdentity, MachineImages } from "./contract.js";
import { place, stateImage } from "./disk.js";
import { GRUB_DIR } from "./esp-grub.js";
import { ESP_MOUNT } from "./guest.js";
import { writeNodeFiles, type NodeFiles } from "./node.js";

/** Where the guest reads them (the bind mount of docs/machine.md). */
export const GUEST_CONFIG = "/etc/liken/agent.yaml";
export const GUEST_KUBECONFIG = "/etc/liken/kubeconfig";
/** The fleet's bootstrap credential, and where the agent writes the kubeconfig of its own. */
export const GUEST_BOOTSTRAP_KUBECONFIG = "/etc/liken/bootstrap-kubeconfig";
export const GUEST_IDENTITY_KUBECONFIG = "/var/lib/liken/identity/kubeconfig";

/** The release the factory wrote into slot a, as `liken release build` published it. */
export interface InstalledRelease {
  version: string;
  /** The catalog's digest of its release document. */
  digest: string;
  /** release.yaml, byte for byte. */
  document: Buffer | string;
}

function bootloaderSection(bootloader: MachineBootloader): AgentYaml["bootloader"] {
  return bootloader === "grub"
    ? { backend: "grub", envDir: `${ESP_MOUNT}/${GRUB_DIR}` }
    : { backend: "systemd-boot", esp: ESP_MOUNT, efivars: "/sys/firmware/efi/efivars" };
}

/**
 * How long a trial may take to rejoin (the agent's default is 15 min): the trial boot's kubelet
 * was seen Ready 20-40 s after its agent started under TCG on a loaded 2-core host; 180 s
 * leaves room for a slower host, and is how long the kubelet-down release's trial waits
 * before it falls back.
 */
export const GUEST_PROVE_MS = 180_000;

/** The guest's /etc/liken/agent.yaml (docs/agent.md lists every field). */
export function agentConfigYaml(identity: MachineIdentity, bootloader: MachineBootloader): string {
  return stringify({
    machine: identity.machine,
    cluster: identity.cluster,
    ...(identity.bootstrap === true
      ? {
          kubeconfig: GUEST_IDENTITY_KUBECONFIG,
          identity: { bootstrapKubeconfig: GUEST_BOOTSTRAP_KUBECONFIG },
        }
      : { kubeconfig: GUEST_KUBECONFIG }),
    slots: {
      a: { device: "/dev/disk/by-partlabel/liken-a" },
      b: { device: "/dev/disk/by-partlabel/liken-b" },
    },
    stateDir: "/var/lib/liken",
    cmdline: "/proc/cmdline",
    bootloader: bootloaderSection(bootloader),
    reboot: { command: ["systemctl", "reboot"] },
    timeouts: { proveMs: GUEST_PROVE_MS },
    direct: true,
  } satisfies AgentYaml);
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
    mkdirSync(join(dir, "etc"), { recursive: true, mode: 0o755 });
    writeFileSync(join(dir, "etc/agent.yaml"), agentConfigYaml(identity, images.bootloader), {
      mode: 0o644,
    });
    const file = identity.bootstrap === true ? "etc/bootstrap-kubeconfig" : "etc/kubeconfig";
    writeFileSync(join(dir, file), identity.kubeconfig, { mode: 0o600 });
    if (installed !== undefined) {
      mkdirSync(join(dir, "slot-a"));
      writeFileSync(join(dir, "slot-a/release.yaml"), installed.document);
      writeFileSync(
        join(dir, "slot-a/marker.json"),
        encodeMarker({
          state: "staged",
          version: installed.version,
          releaseDigest: installed.digest,
          verifiedAt: new Date().toISOString(),
        }),
      );
    }
    if (node !== undefined) writeNodeFiles(dir, node);
    const img = join(work, "state.ext4");
    stateImage(img, dir);
    place(diskCopy, img, images.partitions["liken-state"].offset);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}
