// Where an image keeps the kernel its root filesystem boots with, and the initrd beside it:
// bootc's convention, /usr/lib/modules/<version>/vmlinuz and initramfs.img, or Debian's and
// Fedora's /boot/vmlinuz-<version> with /boot/initrd.img-<version> or
// /boot/initramfs-<version>.img. One kernel version, or the one --kernel-version names.
import { imageError } from "./errors.js";
import { shown, textAsName } from "./names.js";
import { byteOrder, type Tree } from "./tree.js";

export interface BootArtifacts {
  /** The version as text (its name's bytes decoded, ./names.ts: what --kernel-version gives). */
  version: string;
  /** Paths in the tree (no leading "/"; bytes, as the tree's names are). */
  kernel: string;
  initrd?: string;
}

/** Every kernel the tree holds, by version (a version found in both places once, bootc's first). */
export function kernelCandidates(tree: Tree): BootArtifacts[] {
  const found = new Map<string, BootArtifacts>();
  const add = (version: string, kernel: string, initrds: string[]): void => {
    if (found.has(version) || tree.file(kernel) === undefined) return;
    const initrd = initrds.find((p) => tree.file(p) !== undefined);
    found.set(version, { version, kernel, ...(initrd === undefined ? {} : { initrd }) });
  };
  for (const p of tree.paths.keys()) {
    const m = /^usr\/lib\/modules\/([^/]+)\/vmlinuz$/.exec(p);
    if (m) add(shown(m[1]!), p, [`usr/lib/modules/${m[1]}/initramfs.img`]);
  }
  for (const p of tree.paths.keys()) {
    const m = /^boot\/vmlinuz-([^/]+)$/.exec(p);
    if (m) add(shown(m[1]!), p, [`boot/initrd.img-${m[1]}`, `boot/initramfs-${m[1]}.img`]);
  }
  return [...found.values()].sort((a, b) =>
    byteOrder(textAsName(a.version), textAsName(b.version)),
  );
}

/** The image's kernel and initrd; refuses none, or several without `kernelVersion`. */
export function findBootArtifacts(tree: Tree, kernelVersion?: string): BootArtifacts {
  const all = kernelCandidates(tree);
  const where = "/usr/lib/modules/<version>/vmlinuz (bootc) or /boot/vmlinuz-<version>";
  if (all.length === 0) {
    throw imageError(
      "LIKEN_IMAGE_NO_KERNEL",
      `the image has no kernel at ${where}: a slot boots the kernel its release brings; install one in the image (apt-get install linux-image-amd64, dnf install kernel)`,
      {},
    );
  }
  if (kernelVersion !== undefined) {
    const k = all.find((c) => c.version === kernelVersion);
    if (k === undefined) {
      throw imageError(
        "LIKEN_IMAGE_NO_KERNEL",
        `--kernel-version ${kernelVersion}: the image has no such kernel; it has ${all.map((c) => c.version).join(", ")}`,
        { kernelVersion, candidates: all.map((c) => c.version) },
      );
    }
    return k;
  }
  if (all.length > 1) {
    throw imageError(
      "LIKEN_IMAGE_KERNEL_AMBIGUOUS",
      `the image has ${all.length} kernels (${all.map((c) => `${c.version}: /${shown(c.kernel)}`).join("; ")}): choose one with --kernel-version, or remove the others from the image`,
      { candidates: all.map((c) => c.version) },
    );
  }
  return all[0]!;
}

/**
 * GRUB boots a slot's /boot/vmlinuz and /boot/initrd.img (docs/releases.md, "Boot files"):
 * relative symlinks to the chosen kernel and initrd, added where the image has none.
 */
export function linkGrubBootFiles(tree: Tree, boot: BootArtifacts, mtime: number): void {
  const meta = { mode: 0o777, uid: 0, gid: 0, mtime };
  if (!tree.paths.has("boot")) {
    tree.paths.set("boot", { kind: "dir", meta: { mode: 0o755, uid: 0, gid: 0, mtime } });
  }
  const link = (name: string, to: string): void => {
    const p = `boot/${name}`;
    const e = tree.paths.get(p);
    if (e === undefined || e.kind === "symlink") {
      tree.paths.set(p, { kind: "symlink", target: `../${to}`, meta });
    }
  };
  link("vmlinuz", boot.kernel);
  if (boot.initrd !== undefined) link("initrd.img", boot.initrd);
}
