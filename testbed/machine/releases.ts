// The machine's four releases, each built as an image adopter builds one (docs/day-1.md): a
// Containerfile built by buildah (src/release/from-image/containerfile.ts), then `liken release build
// --from-image` (its code, buildReleaseFromImage). The base image is the configured root
// filesystem (rootfs.ts's mmdebstrap tree with the agent package, guest.ts, and the node,
// node.ts) imported as one OCI layer; v1 is `FROM` it plus the kernel and its initrd at bootc's
// places (/usr/lib/modules/<version>/vmlinuz and initramfs.img) and /etc/os-release; each later
// release is `FROM` the one it changes plus its own initrd (which prints its version) and
// os-release. v3's /sbin/init exits at once, so its boot panics (and the trial's panic=N reboots
// into the default slot); v4 (FROM v2) masks the kubelet's unit, so it boots but never rejoins.
// Each release's rootfs, kernel and initrd artifacts are what the scenario publishes (GRUB boots
// the slot's /boot links, systemd-boot the files from the ESP). Cached with everything they
// are made of.
import { chmodSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { packageAgent } from "../package-agent.js";
import type { MachineRelease } from "./contract.js";
import {
  cachedStage,
  dpkgVersion,
  filesUnder,
  hashFiles,
  MiB,
  newHash,
  run,
  short,
} from "./cache.js";
import { machineInitrd } from "./initrd.js";
import { guestKernel, kernelPackage } from "./kernel.js";
import { configureGuest, maskUnit, writeOsRelease } from "./guest.js";
import { configureNode, DRA_DRIVER_IMAGE, PAUSE_IMAGE, WORKLOAD_IMAGE } from "./node.js";
import { buildNodeImages, workloadBinary } from "./node-images.js";
import { ensureNodeBinaries } from "../../src/controlplane/node-tools.js";
import { ensureTool } from "../../src/controlplane/tools.js";
import { UMOCI_VERSION } from "../../src/controlplane/versions.js";
import { importRootfs, withBuildah } from "../../src/release/from-image/containerfile.js";
import { buildReleaseFromImage } from "../../src/release/from-image/from-image.js";
import { baseRootfs } from "./rootfs.js";

/** The OCI layout directory of the base and the releases' images, in the work directory. */
const LAYOUT = "images";

/** Every release's time (SOURCE_DATE_EPOCH): 2025-12-01. */
const EPOCH = 1764547200;

/** v1 (installed), v2 (good), v3 (its boot panics), v4 (its kubelet never starts). */
export const RELEASE_VERSIONS = [
  "2026.12.01-001",
  "2026.12.01-002",
  "2026.12.01-003",
  "2026.12.01-004",
] as const;

export interface SlotSet {
  dir: string;
  /** The channel directory the releases were built into (<channel>/<version>/release.yaml). */
  channel: string;
  releases: [MachineRelease, MachineRelease, MachineRelease, MachineRelease];
  kernelPackage: string;
  /** Bytes: each slot image, the kernel, the initrd, the root filesystem's files. */
  sizes: Record<string, number>;
  /** Seconds this build took, or 0 when it came from the cache. */
  builtSeconds: number;
}

/** What the agent package is made of: a change to any of them makes new slot images. */
function agentInputs(): string[] {
  return [
    ...filesUnder("src"),
    "package.json",
    "package-lock.json",
    "testbed/package-agent.ts",
    "testbed/agent.yaml.example",
    "config/systemd/liken-agent.service",
    "build/Release/liken_native.node",
  ];
}

const SOURCES = [
  "testbed/cpio.ts",
  "testbed/machine/cache.ts",
  "testbed/machine/kernel.ts",
  "testbed/machine/initrd.ts",
  "testbed/machine/init.sh",
  "testbed/machine/rootfs.ts",
  "testbed/machine/guest.ts",
  "testbed/machine/releases.ts",
  "testbed/machine/node.ts",
  "testbed/machine/node-images.ts",
  "testbed/machine/workload.c",
];

/**
 * Slot image size: the files, 15 % more for ext4's own blocks (inode tables, the journal) and
 * 24 MiB free. The release is the whole image, so every MiB here is downloaded and written.
 */
function imageMiB(root: string): number {
  const bytes = Number(run("du", ["-sb", "--apparent-size", root]).split("\t")[0]);
  return Math.ceil((bytes * 1.15) / MiB / 4) * 4 + 24;
}

function panicInit(version: string): string {
  return `#!/bin/sh
# Release ${version} is the scenario's bad release: its init exits at once, so the kernel
# panics ("Attempted to kill init") and the trial entry's panic=N reboots the machine.
echo "LIKEN-FAULT panic: release ${version} has a broken /sbin/init"
exit 1
`;
}

/** The kernel's version from its package (`linux-image-6.1.0-57-amd64=...` -> `6.1.0-57-amd64`). */
function kernelVersion(pkg: string): string {
  const m = /^linux-image-([^=]+)=/.exec(pkg);
  if (m === null) throw new Error(`machine: cannot read a kernel version from package ${pkg}`);
  return m[1]!;
}

/**
 * Release i's Containerfile context: FROM the release it changes (v1: the base, v4: v2, the
 * others: the one before), COPY of the files that change. bootc's places for the kernel and
 * initrd (/usr/lib/modules/<version>/vmlinuz and initramfs.img); from-image links /boot/vmlinuz
 * and /boot/initrd.img to them for GRUB.
 */
function releaseContext(
  work: string,
  i: number,
  kver: string,
  vmlinuz: Buffer,
  initrd: Buffer,
  /** The OCI layout, relative to `work`. */
  layout: string,
): { context: string; containerfile: string } {
  const version = RELEASE_VERSIONS[i]!;
  const from = i === 0 ? "base" : i === 3 ? RELEASE_VERSIONS[1] : RELEASE_VERSIONS[i - 1]!;
  const context = join(work, "context", version);
  const over = join(context, "over");
  const modules = join(over, "usr/lib/modules", kver);
  mkdirSync(modules, { recursive: true });
  if (i === 0) writeFileSync(join(modules, "vmlinuz"), vmlinuz);
  writeFileSync(join(modules, "initramfs.img"), initrd);
  writeOsRelease(over, version);
  if (i === 2) {
    mkdirSync(join(over, "usr/sbin"), { recursive: true });
    writeFileSync(join(over, "usr/sbin/init"), panicInit(version));
    chmodSync(join(over, "usr/sbin/init"), 0o755);
  }
  // The kubelet-down release: it boots and its agent runs, but its unit is masked, so its
  // Node never shows this boot (the trial gives up with NodeNotRejoined and falls back).
  if (i === 3) {
    mkdirSync(join(over, "etc/systemd/system"), { recursive: true });
    maskUnit(over, "kubelet.service");
  }
  // FROM names the layout relative to the work directory, where buildah runs (containerfile.ts).
  const containerfile = [
    `FROM oci:${layout}:${from}`,
    "COPY over/ /",
    `LABEL org.opencontainers.image.version=${version}`,
    "",
  ].join("\n");
  writeFileSync(join(context, "Containerfile"), containerfile);
  return { context, containerfile };
}

/**
 * The releases' cache key: this recipe's files (the Containerfiles are written by this file),
 * liken's whole src/ (the agent package, containerfile.ts, from-image), the base, the kernel
 * package and the tools whose output lands in the images.
 */
export function slotsKey(baseDir: string): string {
  const h = hashFiles(newHash("slots"), [...SOURCES, ...agentInputs()]);
  h.update(baseDir)
    .update(kernelPackage())
    .update(`busybox-static=${dpkgVersion("busybox-static")}`)
    .update(`buildah=${dpkgVersion("buildah")}`)
    .update(`e2fsprogs=${dpkgVersion("e2fsprogs")}`)
    .update(`umoci=${UMOCI_VERSION}`);
  h.update(RELEASE_VERSIONS.join(","));
  return short(h);
}

export async function buildSlots(log: (s: string) => void): Promise<SlotSet> {
  const base = await baseRootfs(log);
  const t0 = Date.now();
  const stage = await cachedStage("slots", slotsKey(base.dir), async (work) => {
    log(`machine: building the releases in ${work}`);
    const pkg = await packageAgent({ out: join(work, "agent") });
    const kernel = guestKernel(work);
    const kver = kernelVersion(kernel.package);
    const initrds = RELEASE_VERSIONS.map((v) => machineInitrd(kernel, v));
    const root = join(work, "root");
    run("cp", ["-a", "--reflink=auto", join(base.dir, "root"), root]);
    configureGuest(root, pkg.tarball);
    const nodeBin = await ensureNodeBinaries(log);
    const images = await buildNodeImages(
      work,
      [
        { ref: PAUSE_IMAGE, path: "/pause", from: join(nodeBin, "pause") },
        { ref: WORKLOAD_IMAGE, path: "/workload", from: workloadBinary(work) },
        { ref: DRA_DRIVER_IMAGE, path: "/dra-test-driver", from: join(nodeBin, "dra-test-driver") },
      ],
      log,
    );
    configureNode(root, nodeBin, images);
    // A container image holds no device nodes (from-image refuses them): the initrd mounts
    // devtmpfs on /dev, which stays as an empty directory.
    run("find", [join(root, "dev"), "-mindepth", "1", "-delete"]);
    // The slot: the root filesystem with room to spare, then the kernel and initrd after it.
    const boot =
      Math.ceil((kernel.vmlinuz.length + Math.max(...initrds.map((b) => b.length))) / MiB) + 2;
    const slotBytes = (imageMiB(root) + boot) * MiB;
    const sizes: Record<string, number> = {
      rootFiles: Number(run("du", ["-sb", "--apparent-size", root]).split("\t")[0]),
      vmlinuz: kernel.vmlinuz.length,
      initrd: initrds[0]!.length,
      agentTarball: pkg.sizes.tarball,
    };
    // The base image: the configured root filesystem as one layer (an image builder's own
    // base, made by mmdebstrap); every release is a Containerfile FROM it or a later one.
    const layout = join(work, LAYOUT);
    const t1 = Date.now();
    await importRootfs({
      rootfs: root,
      layout,
      name: "base",
      umoci: await ensureTool("umoci", log),
      sourceDateEpoch: EPOCH,
      workDir: work,
    });
    rmSync(root, { recursive: true, force: true });
    log(`machine: base image in ${((Date.now() - t1) / 1000).toFixed(1)} s`);
    const channel = join(work, "channel");
    const releases: MachineRelease[] = [];
    await withBuildah({ workDir: work, sourceDateEpoch: EPOCH, log }, async (b) => {
      for (let i = 0; i < RELEASE_VERSIONS.length; i++) {
        const version = RELEASE_VERSIONS[i]!;
        const t2 = Date.now();
        const { context, containerfile } = releaseContext(
          work,
          i,
          kver,
          kernel.vmlinuz,
          initrds[i]!,
          LAYOUT,
        );
        const ref = await b.build({ containerfile, context, layout, name: version, cwd: work });
        const t3 = Date.now();
        // `liken release build --from-image <ref> --slot-size ...`, its code.
        const r = await buildReleaseFromImage({
          ref,
          out: channel,
          slotSizeBytes: slotBytes,
          sourceDateEpoch: EPOCH,
          workDir: work,
          log,
        });
        log(
          `machine: ${version}: buildah ${((t3 - t2) / 1000).toFixed(1)} s, from-image ${((Date.now() - t3) / 1000).toFixed(1)} s (${r.digest})`,
        );
        const file = (name: string): string => {
          const a = r.release.artifacts.find((x) => x.name === name);
          if (a === undefined) throw new Error(`machine: release ${version} has no ${name}`);
          return join(r.dir, a.path);
        };
        sizes[version] = slotBytes;
        releases.push({
          version,
          slotImage: file("rootfs"),
          panics: i === 2,
          ...(i === 3 ? { kubeletDown: true } : {}),
          bootFiles: { kernel: file("kernel"), initrd: file("initrd") },
        });
      }
    });
    // The images are in the releases now; the agent's tarball stays for reference.
    rmSync(layout, { recursive: true, force: true });
    rmSync(join(work, "agent", "tree"), { recursive: true, force: true });
    rmSync(join(work, "kernel"), { recursive: true, force: true });
    const local = (p: string): string => p.slice(work.length + 1);
    const manifest = {
      releases: releases.map((r) => ({
        ...r,
        slotImage: local(r.slotImage),
        bootFiles: { kernel: local(r.bootFiles!.kernel), initrd: local(r.bootFiles!.initrd) },
      })),
      kernelPackage: kernel.package,
      sizes,
    };
    writeFileSync(join(work, "slots.json"), `${JSON.stringify(manifest, null, 2)}\n`);
    log(`machine: releases in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  });
  const m = JSON.parse(readFileSync(join(stage.dir, "slots.json"), "utf8")) as {
    releases: MachineRelease[];
    kernelPackage: string;
    sizes: Record<string, number>;
  };
  return {
    dir: stage.dir,
    releases: m.releases.map((r) => ({
      ...r,
      slotImage: join(stage.dir, r.slotImage),
      bootFiles: {
        kernel: join(stage.dir, r.bootFiles!.kernel),
        initrd: join(stage.dir, r.bootFiles!.initrd),
      },
    })) as SlotSet["releases"],
    channel: join(stage.dir, "channel"),
    kernelPackage: m.kernelPackage,
    sizes: m.sizes,
    builtSeconds: stage.built ? (Date.now() - t0) / 1000 : 0,
  };
}
