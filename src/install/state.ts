// The state partition (liken-state, docs/machine.md "Why a state partition"): an ext4 image made
// with mke2fs -d from a directory, never mounted. What the installer puts there is per machine
// and the same whichever slot boots:
//   etc/agent.yaml               the agent's config (bound onto /etc/liken)
//   etc/bootstrap-kubeconfig     the fleet's bootstrap credential, mode 0600
//   slot-a/release.yaml          the installed release's document, byte for byte
//   slot-a/marker.json           slot a staged with that release (written as the agent would)
//   slot-a/index/<artifact>.lkidx  its chunk indexes, checked against release.yaml (./indexes.ts):
//                                the first update learns what slot a holds without reading it
import { chmodSync, mkdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { stringify } from "yaml";
import type { AgentYaml } from "../agent/config-schema.js";
import { kubeconfigYaml } from "../api/kubeconfig-doc.js";
import type { MachineFrom } from "../agent/machine-name.js";
import type { Role, RebootPolicy } from "../api/types.js";
import { encodeMarker } from "../slots/marker.js";
import { keptIndexPath } from "../slots/store.js";
import { GRUB_DIR, type InstallBootloader } from "./esp.js";
import { run } from "./tools.js";

/** Where the machine's image mounts the ESP (docs/machine.md's fstab); the agent's bootloader paths start here. */
export const ESP_MOUNT = "/boot/efi";
/** Where the agent reads them on the machine (the bind mount of docs/machine.md). */
export const MACHINE_BOOTSTRAP_KUBECONFIG = "/etc/liken/bootstrap-kubeconfig";
export const MACHINE_KUBECONFIG = "/etc/liken/kubeconfig";
/** Where the agent writes the kubeconfig of the certificate it joins for (on the state partition). */
export const MACHINE_IDENTITY_KUBECONFIG = "/var/lib/liken/identity/kubeconfig";

export function bootloaderSection(bootloader: InstallBootloader): AgentYaml["bootloader"] {
  return bootloader === "grub"
    ? { backend: "grub", envDir: `${ESP_MOUNT}/${GRUB_DIR}` }
    : { backend: "systemd-boot", esp: ESP_MOUNT, efivars: "/sys/firmware/efi/efivars" };
}

export interface AgentYamlInput {
  cluster: string;
  bootloader: InstallBootloader;
  /** Absent: the agent takes the hostname, or the DMI serial (docs/agent.md). */
  machine?: string;
  /** Without machine: which of the two the agent tries first. */
  machineFrom?: MachineFrom;
  /** The credential is the fleet's bootstrap token (the agent joins for its own certificate), or the machine's own kubeconfig. */
  credential: "bootstrap" | "kubeconfig";
  role?: Role;
  rebootPolicy?: RebootPolicy;
}

/** /etc/liken/agent.yaml as the installer writes it (docs/agent.md lists every field). */
export function agentYaml(i: AgentYamlInput, extra: Partial<AgentYaml> = {}): AgentYaml {
  return {
    ...(i.machine === undefined ? {} : { machine: i.machine }),
    ...(i.machineFrom === undefined ? {} : { machineFrom: i.machineFrom }),
    cluster: i.cluster,
    ...(i.role === undefined ? {} : { role: i.role }),
    ...(i.rebootPolicy === undefined ? {} : { rebootPolicy: i.rebootPolicy }),
    ...(i.credential === "bootstrap"
      ? {
          kubeconfig: MACHINE_IDENTITY_KUBECONFIG,
          identity: { bootstrapKubeconfig: MACHINE_BOOTSTRAP_KUBECONFIG },
        }
      : { kubeconfig: MACHINE_KUBECONFIG }),
    slots: {
      a: { device: "/dev/disk/by-partlabel/liken-a" },
      b: { device: "/dev/disk/by-partlabel/liken-b" },
    },
    stateDir: "/var/lib/liken",
    cmdline: "/proc/cmdline",
    bootloader: bootloaderSection(i.bootloader),
    reboot: { command: ["systemctl", "reboot"] },
    ...extra,
  };
}

export function agentYamlText(y: AgentYaml): string {
  return `# yaml-language-server: $schema=/usr/share/doc/liken/agent.schema.json\n# Written by liken machine install (docs/day-1.md).\n${stringify(y)}`;
}

/** A bootstrap kubeconfig from its parts: the API server, its CA (PEM), the token. */
export function bootstrapKubeconfig(o: { server: string; caPem: string; token: string }): string {
  return kubeconfigYaml({
    server: o.server,
    user: "liken-bootstrap",
    cluster: "liken",
    credentials: { token: o.token },
    caData: Buffer.from(o.caPem).toString("base64"),
  });
}

/** The installed release, as the agent itself records a staged slot (src/slots/store.ts). */
export interface InstalledRelease {
  version: string;
  /** The catalog digest of its release document. */
  digest: string;
  document: Buffer | string;
  verifiedAt: Date;
  /** The release's chunk index of each artifact (artifact name -> bytes), to keep for slot a. */
  indexes?: ReadonlyMap<string, Buffer>;
}

/** Lays out the state directory `dir`: agent.yaml, the credential (0600), slot a's record. */
export function writeStateTree(
  dir: string,
  o: {
    agentYaml?: string;
    /** The file under etc/ and its content: bootstrap-kubeconfig or kubeconfig. */
    credential?: { file: "bootstrap-kubeconfig" | "kubeconfig"; text: string };
    installed?: InstalledRelease;
    /** More empty directories the image's bind mounts need (a node's containerd, kubelet). */
    dirs?: readonly string[];
    /** More files (path under the state partition -> content), mode 0600: a kubelet's bootstrap kubeconfig. */
    files?: Readonly<Record<string, Buffer | string>>;
  },
): void {
  mkdirSync(join(dir, "etc"), { recursive: true, mode: 0o755 });
  for (const d of o.dirs ?? []) mkdirSync(join(dir, d), { recursive: true });
  if (o.agentYaml !== undefined) {
    writeFileSync(join(dir, "etc/agent.yaml"), o.agentYaml);
    chmodSync(join(dir, "etc/agent.yaml"), 0o644);
  }
  if (o.credential !== undefined) {
    // Written 0600 from the start: the token is never readable by others, not even briefly.
    const f = join(dir, "etc", o.credential.file);
    writeFileSync(f, o.credential.text, { mode: 0o600 });
    chmodSync(f, 0o600);
  }
  for (const [p, content] of Object.entries(o.files ?? {})) {
    mkdirSync(dirname(join(dir, p)), { recursive: true });
    writeFileSync(join(dir, p), content, { mode: 0o600 });
    chmodSync(join(dir, p), 0o600);
  }
  if (o.installed !== undefined) {
    mkdirSync(join(dir, "slot-a"));
    writeFileSync(join(dir, "slot-a/release.yaml"), o.installed.document);
    for (const [name, bytes] of o.installed.indexes ?? []) {
      const f = join(dir, "slot-a", keptIndexPath(name));
      mkdirSync(dirname(f), { recursive: true });
      writeFileSync(f, bytes);
    }
    writeFileSync(
      join(dir, "slot-a/marker.json"),
      encodeMarker({
        state: "staged",
        version: o.installed.version,
        releaseDigest: o.installed.digest,
        verifiedAt: o.installed.verifiedAt.toISOString(),
      }),
    );
  }
}

/**
 * Makes the ext4 state filesystem labelled liken-state, holding `dir`'s files (their modes
 * kept), of `sizeBytes`: in the file `target` itself, or at byte `offset` of it (a disk or a disk
 * image: mke2fs writes the partition's bytes in place, with no image file in between).
 */
export function stateFilesystem(
  target: string,
  dir: string,
  sizeBytes: number,
  offset?: number,
): void {
  run("mke2fs", [
    "-q",
    "-F",
    "-t",
    "ext4",
    "-L",
    "liken-state",
    "-m",
    "0",
    ...(offset === undefined ? [] : ["-E", `offset=${offset}`]),
    "-d",
    dir,
    target,
    `${Math.floor(sizeBytes / 1024)}k`,
  ]);
}
