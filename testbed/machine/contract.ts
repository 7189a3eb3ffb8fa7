// The contract between the machine image build (testbed/machine/) and the machine scenario
// (test/qemu/machine.ts): what the build hands over, and the fixed addresses the guest uses to
// reach the host. QEMU user networking (restrict=on) forwards each address to a loopback port
// that the scenario chooses (`guestfwd`), so the guest image never needs to know host ports.

export type MachineBootloader = "grub" | "systemd-boot";
export const MACHINE_BOOTLOADERS: readonly MachineBootloader[] = ["grub", "systemd-boot"];

/** The guest's own address: what QEMU user networking's DHCP hands out (its first lease). */
export const GUEST_ADDRESS = "10.0.2.15";

/** Where the guest finds the API server and the release channel. */
export const GUEST_API = { host: "10.0.2.100", port: 6443 } as const;
export const GUEST_CHANNEL = { host: "10.0.2.101", port: 8080 } as const;

export type MachinePartition = "esp" | "liken-a" | "liken-b" | "liken-state";

export interface MachineRelease {
  version: string;
  /** The ext4 image of the slot, byte for byte what the release carries. */
  slotImage: string;
  /** Its boot panics (the scenario's bad release). */
  panics: boolean;
  /** It boots and its agent runs, but its kubelet never starts (kubelet.service masked). */
  kubeletDown?: boolean;
  /**
   * Its kernel and initrd as files, published as the release's `kernel` and `initrd` artifacts
   * (systemd-boot boots them from the ESP, where the agent installs them; GRUB boots the same
   * bytes from the slot's /boot). The lab's stand-in releases have none.
   */
  bootFiles?: { kernel: string; initrd: string };
}

export interface MachineImages {
  bootloader: MachineBootloader;
  /** A raw GPT disk: the ESP, liken-a holding releases[0], liken-b empty, liken-state empty ext4. Copy it before booting. */
  disk: string;
  partitions: Record<MachinePartition, { offset: number; size: number }>;
  /** v1 (installed), v2 (good), v3 (its trial panics), and v4 (its kubelet never starts). */
  releases: readonly [MachineRelease, MachineRelease, MachineRelease, MachineRelease];
  /** The OVMF variable store to start from (a copy per run), when the backend needs prepared variables. */
  ovmfVars?: string;
}

/** What only the scenario knows: put on the state partition before the first boot. */
export interface MachineIdentity {
  machine: string;
  cluster: string;
  /**
   * A kubeconfig naming https://GUEST_API and the control plane's CA: with `bootstrap`, the
   * fleet's bootstrap token (the agent joins for its own certificate, docs/machine.md
   * "Identity"); without, the machine's client certificate made by hand.
   */
  kubeconfig: string;
  bootstrap?: boolean;
}

/**
 * What the guest prints on its serial console (ttyS0, 115200). At every boot the initrd prints
 * GUEST_INITRD_LINE first (the release its initrd was built for), then GUEST_BOOT_LINE before
 * systemd starts: the slot, /etc/os-release's VERSION, and whether this
 * is a trial (GRUB's liken.trial=1, or systemd-boot's LoaderBootCountPath). The panicking
 * release prints GUEST_PANIC_LINE from its /sbin/init, then the kernel panics and reboots 3 s
 * later. systemd prints GUEST_AGENT_READY once liken-agent.service sent READY=1; the agent's
 * log lines follow as `liken[<pid>]: {<pino JSON>}`.
 */
export const GUEST_INITRD_LINE = /LIKEN-INITRD version=(\S+)/;
export const GUEST_BOOT_LINE = /LIKEN-BOOT slot=([ab]) version=(\S+) trial=([01])/;
export const GUEST_PANIC_LINE = /LIKEN-FAULT panic: release (\S+)/;
export const GUEST_AGENT_READY = /Started liken-agent\.service/;
export const GUEST_AGENT_LOG = /liken\[\d+\]: (\{"level":\d+.*\})/;
