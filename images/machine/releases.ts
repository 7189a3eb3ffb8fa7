// The machine's three releases as ext4 slot images (mke2fs -d, no root mounts): one root
// filesystem with the agent package, the kernel and the initrd under /boot, differing in
// /etc/os-release's VERSION and in the initrd, which carries the release's version; the third
// one's /sbin/init exits at once, so its boot panics (and the trial's panic=N reboots into the
// default slot); the fourth one's kubelet unit is masked, so it boots but never rejoins. Each release's kernel and initrd are files too, for its `kernel` and `initrd`
// artifacts (systemd-boot boots them from the ESP). Cached with everything they are made of.
import { createHash } from "node:crypto";
import {
  chmodSync,
  mkdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
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
import { baseRootfs } from "./rootfs.js";

/** v1 (installed), v2 (good), v3 (its boot panics), v4 (its kubelet never starts). */
export const RELEASE_VERSIONS = [
  "2026.12.01-001",
  "2026.12.01-002",
  "2026.12.01-003",
  "2026.12.01-004",
] as const;

export interface SlotSet {
  dir: string;
  releases: [MachineRelease, MachineRelease, MachineRelease, MachineRelease];
  /** The installed release's (v1's) kernel and initrd, for the image's ESP. */
  vmlinuz: string;
  initrd: string;
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
    "images/package-agent.ts",
    "images/agent.yaml.example",
    "config/systemd/liken-agent.service",
    "build/Release/liken_native.node",
  ];
}

const SOURCES = [
  "images/cpio.ts",
  "images/machine/cache.ts",
  "images/machine/kernel.ts",
  "images/machine/initrd.ts",
  "images/machine/init.sh",
  "images/machine/rootfs.ts",
  "images/machine/guest.ts",
  "images/machine/releases.ts",
  "images/machine/node.ts",
  "images/machine/node-images.ts",
  "images/machine/workload.c",
];

/** A UUID made from a name, so one version's filesystem gets the same UUID on every build. */
function uuidOf(name: string): string {
  const h = createHash("sha256").update(name).digest("hex");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-8${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

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

export async function buildSlots(log: (s: string) => void): Promise<SlotSet> {
  const base = await baseRootfs(log);
  const kpkg = kernelPackage();
  const h = hashFiles(newHash("slots"), [...SOURCES, ...agentInputs()]);
  h.update(base.dir)
    .update(kpkg)
    .update(`busybox-static=${dpkgVersion("busybox-static")}`);
  h.update(RELEASE_VERSIONS.join(","));
  const t0 = Date.now();
  const stage = await cachedStage("slots", short(h), async (work) => {
    log(`machine: building the slot images in ${work}`);
    const pkg = await packageAgent({ out: join(work, "agent") });
    const kernel = guestKernel(work);
    // One kernel binary for all releases; each its own initrd (the version it prints).
    writeFileSync(join(work, "vmlinuz"), kernel.vmlinuz);
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
    mkdirSync(join(root, "boot"), { recursive: true });
    writeFileSync(join(root, "boot/vmlinuz"), kernel.vmlinuz);
    writeFileSync(join(root, "boot/initrd.img"), initrds[0]!);
    const size = imageMiB(root);
    const sizes: Record<string, number> = {
      rootFiles: Number(run("du", ["-sb", "--apparent-size", root]).split("\t")[0]),
      vmlinuz: kernel.vmlinuz.length,
      initrd: initrds[0]!.length,
      agentTarball: pkg.sizes.tarball,
    };
    const init = join(root, "usr/sbin/init");
    const systemdInit = readlinkSync(init);
    const releases = RELEASE_VERSIONS.map((version, i): MachineRelease => {
      const panics = i === 2;
      const kubeletDown = i === 3;
      writeOsRelease(root, version);
      // The same bytes in the slot's /boot (GRUB's) and as the release's initrd artifact.
      mkdirSync(join(work, version));
      const initrd = join(work, version, "initrd.img");
      writeFileSync(initrd, initrds[i]!);
      writeFileSync(join(root, "boot/initrd.img"), initrds[i]!);
      rmSync(init, { force: true });
      if (panics) {
        writeFileSync(init, panicInit(version));
        chmodSync(init, 0o755);
      } else {
        symlinkSync(systemdInit, init);
      }
      // The kubelet-down release: it boots and its agent runs, but its unit is masked, so its
      // Node never shows this boot (the trial gives up with NodeNotRejoined and falls back).
      if (kubeletDown) maskUnit(root, "kubelet.service");
      const img = join(work, `${version}.ext4`);
      const uuid = uuidOf(`liken-machine-${version}`);
      run("mke2fs", [
        "-q",
        "-t",
        "ext4",
        "-L",
        "liken-root",
        "-U",
        uuid,
        "-E",
        `hash_seed=${uuid}`,
        "-m",
        "0",
        // mke2fs.conf would make a filesystem this small "small": 1 KiB blocks and an inode
        // per 4 KiB. The usual 4 KiB blocks and an inode per 16 KiB fit a root filesystem.
        "-T",
        "default",
        "-b",
        "4096",
        "-d",
        root,
        img,
        `${size}M`,
      ]);
      sizes[version] = size * MiB;
      return {
        version,
        slotImage: img,
        panics,
        ...(kubeletDown ? { kubeletDown } : {}),
        bootFiles: { kernel: join(work, "vmlinuz"), initrd },
      };
    });
    // The root filesystem is in the images now; the agent's tarball stays for reference.
    rmSync(root, { recursive: true, force: true });
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
    log(`machine: slot images in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
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
    vmlinuz: join(stage.dir, "vmlinuz"),
    initrd: join(stage.dir, RELEASE_VERSIONS[0], "initrd.img"),
    kernelPackage: m.kernelPackage,
    sizes: m.sizes,
    builtSeconds: stage.built ? (Date.now() - t0) / 1000 : 0,
  };
}
