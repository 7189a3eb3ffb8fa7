// The machine's root filesystem: Debian 13 (trixie), minbase with systemd, udev and Debian's
// nodejs (20.19, inside liken's engines range), containerd, runc and the CNI plugins, no recommends, no docs, man pages or locales,
// built by mmdebstrap (as root: `--mode=root`, else `--mode=unshare`; no daemon, no Docker).
// That base is cached; guest.ts makes a copy of it a liken machine.
import { mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { cachedStage, hashFiles, newHash, run, short } from "./cache.js";

export const SUITE = "trixie";
export const MIRROR = "http://deb.debian.org/debian";
export const PACKAGES = [
  "systemd",
  "systemd-sysv",
  "udev",
  "nodejs",
  // The node's container runtime (testbed/machine/node.ts): containerd, its runc and the CNI
  // plugins (bridge, host-local, loopback), as Debian packages them.
  "containerd",
  "runc",
  "containernetworking-plugins",
] as const;

const EXCLUDED = [
  "/usr/share/man/*",
  "/usr/share/doc/*",
  "/usr/share/locale/*",
  "/usr/share/info/*",
  "/usr/share/lintian/*",
];

/**
 * The cached base root filesystem (`<dir>/root`). Its hash covers this file and the package
 * set, not the mirror's state: delete the directory to take newer packages.
 */
export function baseRootfs(log: (s: string) => void): Promise<{ dir: string; built: boolean }> {
  const hash = short(hashFiles(newHash("rootfs"), ["testbed/machine/rootfs.ts"]));
  return cachedStage("rootfs", hash, (work) => {
    const t0 = Date.now();
    log(`machine: mmdebstrap ${SUITE} (${PACKAGES.join(", ")}) into ${work}`);
    const root = join(work, "root");
    run(
      "mmdebstrap",
      [
        `--mode=${process.getuid?.() === 0 ? "root" : "unshare"}`,
        "--variant=minbase",
        `--include=${PACKAGES.join(",")}`,
        '--aptopt=APT::Install-Recommends "false"',
        ...EXCLUDED.map((p) => `--dpkgopt=path-exclude=${p}`),
        "--dpkgopt=path-include=/usr/share/doc/*/copyright",
        SUITE,
        root,
        MIRROR,
      ],
      { env: { ...process.env, TMPDIR: work } },
    );
    // What a machine never reads: the hardware database (a VM's devices need none of it), the
    // package lists and caches.
    for (const p of ["usr/lib/udev/hwdb.d", "usr/lib/udev/hwdb.bin", "var/lib/apt/lists"]) {
      rmSync(join(root, p), { recursive: true, force: true });
    }
    mkdirSync(join(root, "var/lib/apt/lists/partial"), { recursive: true });
    log(`machine: base root filesystem in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  });
}
