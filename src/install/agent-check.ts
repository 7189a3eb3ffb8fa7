// Does the release's root filesystem carry the agent? A slot is a whole release, byte for byte
// as its digests say, so the installer cannot add the agent to it (docs/adr/installer.md): the
// image must bring the agent package, its unit enabled, and the fstab line of the state
// partition (docs/day-1.md, "What the image must contain"). This looks inside the rootfs
// artifact (ext4 with debugfs, EROFS with dump.erofs), never mounting it, before anything is
// written, and names what is missing.
import { spawnSync } from "node:child_process";
import { InstallError, NOTHING_WRITTEN } from "./errors.js";
import { probeSignatures } from "./disk.js";

/** What a liken machine's root filesystem must hold (paths inside it). */
export const AGENT_PATHS = {
  launcher: "/usr/bin/liken",
  unit: "/usr/lib/systemd/system/liken-agent.service",
  enabled: "/etc/systemd/system/multi-user.target.wants/liken-agent.service",
  fstab: "/etc/fstab",
} as const;

/** Whether `path` exists in the filesystem image `img` of type `fs`. */
function exists(img: string, fs: string, path: string): boolean {
  if (fs === "ext4" || fs === "ext3" || fs === "ext2") {
    const r = spawnSync("debugfs", ["-R", `stat ${path}`, img], { encoding: "latin1" });
    if (r.error)
      throw new InstallError(
        "LIKEN_INSTALL_TOOL_FAILED",
        `debugfs: ${r.error.message}: install e2fsprogs`,
      );
    return /^Inode: \d+/m.test(r.stdout);
  }
  const r = spawnSync("dump.erofs", [`--path=${path}`, img], { encoding: "latin1" });
  if (r.error)
    throw new InstallError(
      "LIKEN_INSTALL_TOOL_FAILED",
      `dump.erofs: ${r.error.message}: install erofs-utils`,
    );
  return r.status === 0;
}

function cat(img: string, fs: string, path: string): string {
  if (fs.startsWith("ext"))
    return spawnSync("debugfs", ["-R", `cat ${path}`, img], { encoding: "utf8" }).stdout;
  // dump.erofs cannot print a file; fsck.erofs --extract can, but the fstab check is worth less than its cost.
  return "";
}

/**
 * Refuses a rootfs without the agent (LIKEN_INSTALL_RELEASE_UNUSABLE). Returns a note when the
 * filesystem is one it cannot look into (the install goes on, saying so).
 */
export function checkAgentInRootfs(
  img: string,
  version: string,
  /** More paths the boot needs (GRUB: the slot's /boot/vmlinuz and /boot/initrd.img). */
  more: Record<string, string> = {},
): string | undefined {
  const type = probeSignatures(img)
    .find((s) => s.startsWith("TYPE="))
    ?.slice(5);
  if (type === undefined || !["ext2", "ext3", "ext4", "erofs"].includes(type)) {
    return `the rootfs of release ${version} is ${type ?? "no filesystem blkid knows"}: the agent in it was not checked`;
  }
  const missing = Object.entries({ ...AGENT_PATHS, ...more })
    .filter(([, p]) => !exists(img, type, p))
    .map(([what, p]) => `${what} ${p}`);
  if (
    missing.length === 0 &&
    type.startsWith("ext") &&
    !/PARTLABEL=liken-state\s/.test(cat(img, type, AGENT_PATHS.fstab))
  )
    missing.push(`fstab line for PARTLABEL=liken-state in ${AGENT_PATHS.fstab}`);
  if (missing.length > 0) {
    throw new InstallError(
      "LIKEN_INSTALL_RELEASE_UNUSABLE",
      `release ${version}: its rootfs has no ${missing.join(", ")}; ${NOTHING_WRITTEN}. Build the image with the agent package, \`systemctl enable liken-agent.service\` and the fstab of docs/machine.md (docs/day-1.md, "What the image must contain")`,
      { context: { version, missing } },
    );
  }
  return undefined;
}
