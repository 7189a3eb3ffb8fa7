// Debian's kernel for the machine, and the modules its initrd loads. The kernel package is the
// one the QEMU testbed uses (testbed/build.ts: what linux-image-amd64 depends on, from the
// host's package lists); every release of the machine boots this one kernel. Drivers a QEMU
// guest needs are modules in Debian's build, so the initrd loads them (no modprobe, no
// modules.dep in the root filesystem): the disk and network (virtio), the root and state
// filesystems (ext4), the ESP (vfat and its code pages), efivarfs, the i6300esb watchdog; and what containers need (overlay, bridge, veth).
import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { kernelDeb, kernelPackage, moduleDepends } from "../build.js";
import { MiB } from "./cache.js";

/** The modules the guest needs, by name; their dependencies are added from their modinfo. */
export const GUEST_MODULES = [
  "virtio_pci",
  "virtio_blk",
  "virtio_net",
  "crc32c_generic",
  "ext4",
  "nls_cp437",
  "nls_ascii",
  "nls_utf8",
  "vfat",
  "efivarfs",
  "i6300esb",
  "autofs4",
  // The node (node.ts): containerd's overlayfs snapshotter, the CNI bridge and its veth pairs.
  "overlay",
  "bridge",
  "veth",
] as const;

export interface GuestKernel {
  /** `linux-image-6.1.0-57-amd64=6.1.192-3`. */
  package: string;
  vmlinuz: Buffer;
  /** Modules in an order that loads each after the modules it depends on. */
  modules: { name: string; ko: Buffer }[];
}

export { kernelPackage };

/** A module's name as the kernel spells it (`crc32c-intel.ko` is module crc32c_intel). */
function modName(file: string): string {
  return (file.split("/").pop() ?? "").replace(/\.ko(\.xz|\.zst)?$/, "").replaceAll("-", "_");
}

/** vmlinuz and GUEST_MODULES with their dependencies, in load order, from the kernel .deb. */
export function guestKernel(work: string): GuestKernel {
  const kpkg = kernelPackage();
  const tar = execFileSync("dpkg-deb", ["--fsys-tarfile", kernelDeb(kpkg)], {
    maxBuffer: 2048 * MiB,
  });
  const list = execFileSync("tar", ["-t"], { input: tar, maxBuffer: 64 * MiB })
    .toString("latin1")
    .split("\n");
  const byName = new Map<string, string>();
  for (const p of list) if (/\.ko(\.xz|\.zst)?$/.test(p)) byName.set(modName(p), p);
  const builtinFile = list.find((p) => p.endsWith("/modules.builtin"));
  const x = join(work, "kernel");
  mkdirSync(x, { recursive: true });
  const vmlinuzPath = list.find((p) => /^\.\/boot\/vmlinuz-/.test(p));
  if (vmlinuzPath === undefined) throw new Error(`${kpkg} has no /boot/vmlinuz-*`);
  execFileSync("tar", ["-x", "-C", x, vmlinuzPath, ...(builtinFile ? [builtinFile] : [])], {
    input: tar,
    maxBuffer: 64 * MiB,
  });
  const builtin = new Set(
    builtinFile === undefined
      ? []
      : readFileSync(join(x, builtinFile), "latin1").split("\n").filter(Boolean).map(modName),
  );

  const kos = new Map<string, Buffer>();
  const order: string[] = [];
  const read = (name: string): Buffer => {
    const p = byName.get(name)!;
    execFileSync("tar", ["-x", "-C", x, p], { input: tar, maxBuffer: 64 * MiB });
    let bytes = readFileSync(join(x, p));
    if (p.endsWith(".xz")) bytes = execFileSync("xz", ["-dc"], { input: bytes });
    if (p.endsWith(".zst")) bytes = execFileSync("zstd", ["-dc"], { input: bytes });
    return bytes;
  };
  // Depth first: a module goes into the order after everything it depends on.
  const visit = (name: string, from: string): void => {
    if (order.includes(name) || builtin.has(name)) return;
    if (!byName.has(name)) {
      throw new Error(`${kpkg} has no module ${name} (needed by ${from}) and does not build it in`);
    }
    const ko = kos.get(name) ?? read(name);
    kos.set(name, ko);
    for (const dep of moduleDepends(ko)) visit(dep, name);
    order.push(name);
  };
  for (const m of GUEST_MODULES) visit(m, "the guest");
  return {
    package: kpkg,
    vmlinuz: readFileSync(join(x, vmlinuzPath)),
    modules: order.map((name) => ({ name, ko: kos.get(name)! })),
  };
}
