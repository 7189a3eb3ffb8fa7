// Publishes the guest's releases with their kernel and initrd: `rootfs` (the slot image, at
// offset 0 so the slot mounts), then `kernel` and `initrd` after it, the convention the
// systemd-boot backend installs on the ESP (docs/releases.md, "Boot files").
//
// Why here and not in the host's own build: machine-host.ts publishes each release as one
// `rootfs` artifact, and it is another piece's file. So, before the guest starts, each release
// that has boot files is published again under its version with all three artifacts, the
// catalog digests in the Cluster and in host.releases are replaced, and the guest is installed
// from the new documents (machine-qemu.ts reads v1's from the channel directory). Nothing has
// read the first documents yet: no agent runs before the guest boots.
import { rmSync } from "node:fs";
import path from "node:path";
import type { MachineRelease } from "../../images/machine/contract.js";
import { buildRelease } from "../../src/release/build.js";
import type { Host } from "./machine-host.js";

export async function publishBootFiles(
  host: Host,
  cluster: string,
  releases: readonly MachineRelease[],
): Promise<number> {
  let n = 0;
  for (const r of releases) {
    if (r.bootFiles === undefined) continue;
    const ref = host.releases.find((x) => x.version === r.version);
    if (ref === undefined) throw new Error(`the host published no release ${r.version}`);
    rmSync(path.join(host.channelDir, r.version), { recursive: true, force: true });
    const built = await buildRelease({
      version: r.version,
      out: host.channelDir,
      artifacts: [
        { name: "rootfs", file: r.slotImage, offset: 0 },
        { name: "kernel", file: r.bootFiles.kernel },
        { name: "initrd", file: r.bootFiles.initrd },
      ],
    });
    ref.digest = built.digest;
    n++;
  }
  if (n > 0) {
    await host.api.clusters.patch(cluster, { spec: { releases: { catalog: host.releases } } });
  }
  return n;
}
