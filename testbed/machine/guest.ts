// What makes a copy of the base root filesystem (rootfs.ts) a liken machine: the agent
// package and its unit, the fstab of docs/machine.md, DHCP on the virtio NIC, the agent's lines
// on the serial console, systemd's hardware watchdog, systemd-bless-boot masked, nothing
// interactive at boot, and the first-boot step that sets systemd-boot's default entry.
import { chmodSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { LOADER_GUID } from "../../src/bootloader/efivars.js";
import { DEFAULT } from "../../src/bootloader/systemd-boot.js";
import { run } from "./cache.js";
import { SUITE } from "./rootfs.js";

/** The ESP's mount point in the guest; the agent's bootloader paths start here. */
export const ESP_MOUNT = "/boot/efi";

const FSTAB = `# liken machine (docs/machine.md, "The disk"): the root is the slot the initrd mounted.
PARTLABEL=esp          ${ESP_MOUNT}       vfat  umask=0077  0 0
PARTLABEL=liken-state  /var/lib/liken  ext4  defaults    0 0
/var/lib/liken/etc     /etc/liken      none  bind        0 0
`;

const NETWORK = `# DHCP on the virtio NIC (QEMU user networking hands out 10.0.2.15).
[Match]
Type=ether

[Network]
DHCP=ipv4
LinkLocalAddressing=no
IPv6AcceptRA=no
`;

/** The agent's log on the serial console, next to systemd's own status lines. */
const AGENT_CONSOLE = `[Service]
StandardOutput=journal+console
StandardError=journal+console
`;

const JOURNALD = `[Journal]
Storage=volatile
`;

/**
 * systemd feeds the i6300esb: a hung kernel or PID 1 resets the machine (and a hung trial
 * falls back). 60 s: a guest starved of host CPU for a while must not be reset while alive.
 */
const WATCHDOG = `[Manager]
RuntimeWatchdogSec=60s
`;

const EFI_DEFAULT = `${DEFAULT}-${LOADER_GUID}`;

/**
 * The install step \`bootctl set-default liken-a.conf\` of docs/machine.md, on the machine's
 * first boot (trixie's minimal system has no bootctl): on a systemd-boot machine with no
 * LoaderEntryDefault yet, the running slot's entry becomes the default. efivarfs takes a
 * variable in one write(): dd writes the attribute word and the UTF-16LE name at once.
 */
const BOOT_DEFAULT_SCRIPT = `#!/bin/sh
set -eu
slot=$(tr ' ' '\\n' </proc/cmdline | sed -n 's/^liken\\.slot=\\([ab]\\)$/\\1/p')
[ -n "$slot" ] || { echo "no liken.slot= on the kernel command line" >&2; exit 1; }
tmp=$(mktemp)
printf '\\007\\000\\000\\000l\\000i\\000k\\000e\\000n\\000-\\000%s\\000.\\000c\\000o\\000n\\000f\\000\\000\\000' "$slot" >"$tmp"
dd if="$tmp" of=/sys/firmware/efi/efivars/${EFI_DEFAULT} bs=4096 status=none
rm -f "$tmp"
echo "LoaderEntryDefault set to liken-$slot.conf"
`;

const BOOT_DEFAULT_UNIT = `[Unit]
Description=liken: make the running slot systemd-boot's default entry (first boot)
ConditionPathExists=${ESP_MOUNT}/loader/entries
ConditionPathExists=!/sys/firmware/efi/efivars/${EFI_DEFAULT}
RequiresMountsFor=${ESP_MOUNT}
Before=liken-agent.service

[Service]
Type=oneshot
ExecStart=/usr/lib/liken-machine/boot-default
StandardOutput=journal+console

[Install]
WantedBy=multi-user.target
`;

/** Units a liken guest must not run: interactive first boot, logins, periodic apt. */
const MASKED = [
  "systemd-bless-boot.service",
  "systemd-firstboot.service",
  "getty@.service",
  "serial-getty@.service",
  "console-getty.service",
  "apt-daily.timer",
  "apt-daily-upgrade.timer",
  "dpkg-db-backup.timer",
  "fstrim.timer",
  "e2scrub_all.timer",
  "systemd-pstore.service",
  "getty-static.service",
  // No modprobe in the image: the initrd loaded every module the guest needs.
  "modprobe@.service",
  // First-boot caches the image already has (ld.so.cache) or does not need.
  "ldconfig.service",
  "systemd-journal-catalog-update.service",
  "systemd-hwdb-update.service",
  "systemd-update-done.service",
  // Boot time under TCG (issue 39): on one emulated vCPU every unit's start costs seconds, and
  // none of these serves a headless node: kernel debug and tracing file systems, huge pages,
  // binfmt, FUSE and configfs mounts, password agents, the random seed's save, users created
  // at boot (the image has its users), the network's persistent storage, units from the kernel
  // command line, udev and systemd credentials, sessions and utmp, socket-activated services
  // nothing calls, the temporary files' daily cleanup.
  "proc-sys-fs-binfmt_misc.automount",
  "dev-hugepages.mount",
  "sys-kernel-debug.mount",
  "sys-kernel-tracing.mount",
  "sys-kernel-config.mount",
  "sys-fs-fuse-connections.mount",
  "systemd-ask-password-console.path",
  "systemd-ask-password-wall.path",
  "systemd-random-seed.service",
  "systemd-sysusers.service",
  "systemd-networkd-persistent-storage.service",
  "systemd-network-generator.service",
  "systemd-udev-load-credentials.service",
  "systemd-user-sessions.service",
  "systemd-update-utmp.service",
  "systemd-update-utmp-runlevel.service",
  "systemd-hostnamed.socket",
  "systemd-sysext.socket",
  "systemd-creds.socket",
  "systemd-tmpfiles-clean.timer",
];

/**
 * udev rules a headless QEMU node does not need, masked as udev(7) says (a file of the same
 * name in /etc/udev/rules.d linked to /dev/null): under TCG the coldplug runs every rule for
 * every device, and the mounts of the state partition and the ESP wait for it. Kept: the
 * defaults, block devices and /dev/disk/by-partlabel (the fstab), the network's names and
 * links (systemd-networkd waits for them), Debian's compatibility names and systemd's own tags.
 */
const MASKED_UDEV_RULES = [
  "50-firmware.rules",
  "60-autosuspend.rules",
  "60-cdrom_id.rules",
  "60-dmi-id.rules",
  "60-drm.rules",
  "60-evdev.rules",
  "60-fido-id.rules",
  "60-infiniband.rules",
  "60-input-id.rules",
  "60-persistent-alsa.rules",
  "60-persistent-input.rules",
  "60-persistent-storage-mtd.rules",
  "60-persistent-storage-tape.rules",
  "60-persistent-v4l.rules",
  "60-sensor.rules",
  "60-serial.rules",
  "64-btrfs.rules",
  "70-camera.rules",
  "70-joystick.rules",
  "70-memory.rules",
  "70-mouse.rules",
  "70-power-switch.rules",
  "70-touchpad.rules",
  "70-uaccess.rules",
  "71-seat.rules",
  "73-seat-late.rules",
  "75-probe_mtd.rules",
  "78-sound-card.rules",
  // Loads a module per device's modalias: the initrd loaded every module the guest needs.
  "80-drivers.rules",
  "90-iocost.rules",
];

function put(root: string, path: string, text: string, mode = 0o644): void {
  const p = join(root, path);
  mkdirSync(dirname(p), { recursive: true });
  rmSync(p, { force: true });
  writeFileSync(p, text);
  chmodSync(p, mode);
}

/** Masks `unit` in the root filesystem `root`: a link to /dev/null, as `systemctl mask` makes. */
export function maskUnit(root: string, unit: string): void {
  const p = join(root, "etc/systemd/system", unit);
  rmSync(p, { force: true });
  symlinkSync("/dev/null", p);
}

/** Makes a copy of the base root filesystem a liken machine with the agent tarball in it. */
export function configureGuest(root: string, agentTarball: string): void {
  run("tar", ["-xzf", agentTarball, "-C", root, "--no-same-owner"]);
  put(root, "etc/fstab", FSTAB);
  put(root, "etc/hostname", "liken\n");
  put(root, "etc/systemd/network/20-ether.network", NETWORK);
  put(root, "etc/systemd/system/liken-agent.service.d/console.conf", AGENT_CONSOLE);
  put(root, "etc/systemd/journald.conf.d/liken.conf", JOURNALD);
  put(root, "etc/systemd/system.conf.d/watchdog.conf", WATCHDOG);
  put(root, "usr/lib/liken-machine/boot-default", BOOT_DEFAULT_SCRIPT, 0o755);
  put(root, "etc/systemd/system/liken-boot-default.service", BOOT_DEFAULT_UNIT);
  for (const d of ["var/lib/liken", "etc/liken", ESP_MOUNT.slice(1)]) {
    mkdirSync(join(root, d), { recursive: true });
  }
  for (const u of MASKED) maskUnit(root, u);
  for (const r of MASKED_UDEV_RULES) {
    const p = join(root, "etc/udev/rules.d", r);
    mkdirSync(dirname(p), { recursive: true });
    rmSync(p, { force: true });
    symlinkSync("/dev/null", p);
  }
  rmSync(join(root, "etc/systemd/system/getty.target.wants"), { recursive: true, force: true });
  run("chroot", [
    root,
    "systemctl",
    "enable",
    "liken-agent.service",
    "systemd-networkd.service",
    "liken-boot-default.service",
  ]);
  // The agent's launcher must find node: fail the build, not the boot.
  if (!readFileSync(join(root, "usr/bin/liken"), "latin1").startsWith("#!/bin/sh")) {
    throw new Error(`${root}/usr/bin/liken is not the agent package's launcher`);
  }
}

/** /etc/os-release of one release: its VERSION is what the initrd prints at boot. */
export function writeOsRelease(root: string, version: string): void {
  put(
    root,
    "etc/os-release",
    [
      'NAME="LIKEN"',
      `VERSION="${version}"`,
      "ID=liken",
      "ID_LIKE=debian",
      `VERSION_ID="${version}"`,
      `PRETTY_NAME="LIKEN ${version} (Debian ${SUITE})"`,
      "",
    ].join("\n"),
  );
}
