// Two container images one package apart, and their releases, for bench:delta and for the
// filesystem ADR (docs/adr/slot-filesystem-from-image.md):
//
//   npm run bench:image-pair -- [--dir /var/tmp/liken-image-pair] [--package less] [--fs ext4,erofs]
//
//   base.oci.tar  Debian bookworm minbase with a kernel (linux-image-cloud-amd64) and systemd,
//                 made by mmdebstrap as a tarball and imported as one OCI layer by umoci
//   next.oci.tar  `FROM oci-archive:base.oci.tar` plus one package, built by buildah
//                 (vfs storage, chroot isolation: no daemon) and pushed as an oci-archive
//   <fs>/channel/{base,next}/   each image's release (`liken release build --from-image`)
//
// Then: npm run bench:delta -- --old <dir>/ext4/channel/base --new <dir>/ext4/channel/next
// The images are kept in --dir and reused; delete it for newer packages. Prints, per
// filesystem, the build time, the slot image's used size and the bytes of next's 4 KiB chunks
// found nowhere in base (what a machine must fetch at least).
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import path from "node:path";
import { parseArgs } from "node:util";
import { ensureTool } from "../src/controlplane/tools.js";
import { buildReleaseFromImage } from "../src/release/from-image/from-image.js";
import type { SlotFs } from "../src/release/from-image/fs.js";
import { newContent, usedBytes } from "./delta-files.js";

const { values: args } = parseArgs({
  options: {
    dir: { type: "string", default: "/var/tmp/liken-image-pair" },
    package: { type: "string", default: "less" },
    fs: { type: "string", default: "ext4,erofs" },
    "slot-size": { type: "string", default: "768" },
  },
});
const dir = path.resolve(args.dir!);
const log = (s: string): void => void process.stderr.write(`${s}\n`);
const MiB = 1024 * 1024;
const EPOCH = "1764547200"; // 2025-12-01: the images' and releases' time

// buildah comes with testbed/setup-debian.sh; on a machine set up otherwise, say so before any work.
try {
  execFileSync("buildah", ["--version"], { stdio: "ignore" });
} catch {
  process.stderr.write(
    "bench:image-pair: buildah is not installed; install it with: apt-get install --no-install-recommends buildah\n",
  );
  process.exit(2);
}

function run(cmd: string, argv: string[], opts: { cwd?: string } = {}): string {
  log(`$ ${cmd} ${argv.join(" ")}`);
  return execFileSync(cmd, argv, {
    encoding: "utf8",
    stdio: ["ignore", "pipe", "inherit"],
    env: { ...process.env, SOURCE_DATE_EPOCH: EPOCH },
    maxBuffer: 64 * MiB,
    ...opts,
  });
}

async function baseImage(): Promise<string> {
  const archive = path.join(dir, "base.oci.tar");
  if (existsSync(archive)) return archive;
  const rootfs = path.join(dir, "base-rootfs.tar");
  if (!existsSync(rootfs)) {
    run("mmdebstrap", [
      `--mode=${process.getuid?.() === 0 ? "root" : "unshare"}`,
      "--variant=minbase",
      "--include=linux-image-cloud-amd64,systemd-sysv",
      // A container image holds no device nodes (liken refuses them; udev makes them at boot).
      "--skip=output/dev",
      '--aptopt=APT::Install-Recommends "false"',
      "--dpkgopt=path-exclude=/usr/share/man/*",
      "--dpkgopt=path-exclude=/usr/share/doc/*",
      "--dpkgopt=path-exclude=/usr/share/locale/*",
      "--dpkgopt=path-include=/usr/share/doc/*/copyright",
      "bookworm",
      `${rootfs}.tmp.tar`,
      "http://deb.debian.org/debian",
    ]);
    run("mv", [`${rootfs}.tmp.tar`, rootfs]);
  }
  const umoci = await ensureTool("umoci", log);
  const layout = path.join(dir, "base-layout");
  rmSync(layout, { recursive: true, force: true });
  run(umoci, ["init", "--layout", layout]);
  run(umoci, ["new", "--image", `${layout}:base`]);
  run(umoci, ["raw", "add-layer", "--image", `${layout}:base`, rootfs]);
  run(umoci, [
    "config",
    "--image",
    `${layout}:base`,
    "--config.label",
    "org.opencontainers.image.version=base",
    "--created",
    new Date(Number(EPOCH) * 1000).toISOString(),
  ]);
  run("tar", ["-C", layout, "--sort=name", "-cf", `${archive}.tmp`, "."]);
  run("mv", [`${archive}.tmp`, archive]);
  return archive;
}

function nextImage(base: string): string {
  const archive = path.join(dir, "next.oci.tar");
  if (existsSync(archive)) return archive;
  const ctx = path.join(dir, "next-context");
  mkdirSync(ctx, { recursive: true });
  writeFileSync(
    path.join(ctx, "Containerfile"),
    `FROM oci-archive:${base}:base
RUN apt-get update && apt-get install -y --no-install-recommends ${args.package} && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin
LABEL org.opencontainers.image.version=next
`,
  );
  const storage = ["--storage-driver", "vfs", "--root", path.join(dir, "buildah-root")];
  run("buildah", [
    ...storage,
    "bud",
    "--isolation",
    "chroot",
    "--timestamp",
    EPOCH,
    "-f",
    path.join(ctx, "Containerfile"),
    "-t",
    "localhost/liken-image-pair-next",
    ctx,
  ]);
  run("buildah", [
    ...storage,
    "push",
    "localhost/liken-image-pair-next",
    `oci-archive:${archive}.tmp:next`,
  ]);
  run("mv", [`${archive}.tmp`, archive]);
  return archive;
}

async function main(): Promise<void> {
  mkdirSync(dir, { recursive: true });
  const base = await baseImage();
  const next = nextImage(base);
  const mb = (n: number): string => `${(n / MiB).toFixed(1)}M`;
  for (const fs of args.fs!.split(",") as SlotFs[]) {
    const out = path.join(dir, fs, "channel");
    rmSync(path.join(dir, fs), { recursive: true, force: true });
    const times: number[] = [];
    for (const ref of [base, next]) {
      const t = performance.now();
      await buildReleaseFromImage({
        ref: `oci-archive:${ref}`,
        out,
        fs,
        slotSizeBytes: Number(args["slot-size"]) * MiB,
        sourceDateEpoch: Number(EPOCH),
        log,
      });
      times.push((performance.now() - t) / 1000);
    }
    // Streamed: a slot image may be larger than a Buffer holds (over 2 GiB).
    const a = path.join(out, "base", "rootfs.img");
    const b = path.join(out, "next", "rootfs.img");
    process.stdout.write(
      `image-pair: fs=${fs} rootfs=${mb(statSync(b).size)} used=${mb(await usedBytes(b))} ` +
        `on-disk=${mb(statSync(b).blocks * 512)} ` +
        `build=${times.map((s) => s.toFixed(1)).join("/")}s new-content=${mb(await newContent(a, b))} ` +
        `releases=${path.join(out, "base")} ${path.join(out, "next")}\n`,
    );
  }
  process.stdout.write(
    `image-pair: ${path.basename(base)} ${mb(statSync(base).size)}, ${path.basename(next)} ${mb(statSync(next).size)}\n`,
  );
}

await main();
