// A loopback channel holding one small release, for the native tests that stage a real slot:
// random bytes as its one artifact (in 64 KiB chunks), built by `liken release build`'s code
// and served by the fault server. The caller closes it, which also removes its files.
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { buildRelease } from "../../src/release/build.js";
import { startFaultServer, type FaultServer } from "./fault-server.js";

const KiB = 1024;

export interface ReleaseChannel {
  /** The test's scratch directory; the channel is its `channel/`. */
  root: string;
  server: FaultServer;
  /** The release document's digest, as the Cluster's catalog names it. */
  digest: string;
  close(): Promise<void>;
}

/** `extra`: more artifacts after the rootfs, by name (a `kernel` and `initrd` for systemd-boot). */
export async function startReleaseChannel(
  prefix: string,
  version: string,
  extra: Record<string, Buffer> = {},
): Promise<ReleaseChannel> {
  const root = mkdtempSync(path.join(tmpdir(), prefix));
  writeFileSync(path.join(root, "rootfs.img"), randomBytes(200 * KiB + 7));
  const more = Object.entries(extra).map(([name, bytes]) => {
    writeFileSync(path.join(root, `${name}.img`), bytes);
    return { name, file: path.join(root, `${name}.img`) };
  });
  const built = await buildRelease({
    version,
    out: path.join(root, "channel"),
    chunkSize: 64 * KiB,
    artifacts: [{ name: "rootfs", file: path.join(root, "rootfs.img") }, ...more],
  });
  const server = await startFaultServer(path.join(root, "channel"));
  return {
    root,
    server,
    digest: built.digest,
    close: async () => {
      await server.close();
      rmSync(root, { recursive: true, force: true });
    },
  };
}
