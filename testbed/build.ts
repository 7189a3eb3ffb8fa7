// Builds the QEMU testbed's disk image without root, loop devices or Docker, from Debian's
// packages (testbed/setup-debian.sh installs them): a GPT disk (sgdisk) with an EFI system
// partition (mkfs.vfat -C, filled with mtools) holding a GRUB built with grub-mkimage, the
// grub.cfg of src/bootloader/grub-cfg.ts and the two environment copies of src/bootloader/grub.ts;
// and two ext4 slots (mke2fs -d) each holding Debian's kernel (apt-get download, dpkg-deb) and a
// busybox initramfs. Slot B comes in three variants (good, panic, hang), put in place per scenario
// the way the agent writes a slot. The result is cached by a hash of every input.
//
// `npx tsx testbed/build.ts` prints the directory of the built image.
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import {
  existsSync,
  mkdirSync,
  openSync,
  closeSync,
  readFileSync,
  readSync,
  readdirSync,
  renameSync,
  statSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { grubConfig } from "../src/bootloader/grub-cfg.js";
import { initialEnvBlock } from "../src/bootloader/grub.js";
import { ENV_FILES } from "../src/bootloader/envstore.js";
import { cpioNewc, type CpioEntry } from "./cpio.js";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const MiB = 1024 * 1024;

export const VERSIONS = { a: "2026.10.10-001", b: "2026.10.12-001" } as const;
export type Variant = "good" | "panic" | "hang";
export const VARIANTS: readonly Variant[] = ["good", "panic", "hang"];

/**
 * Seconds a trial may run unconfirmed before the init stops feeding the watchdog: the host
 * must see the trial up, confirm and answer within it even when the machine is starved.
 */
export const CONFIRM_DEADLINE_S = 25;
/**
 * i6300esb heartbeat (s). The Linux driver programs both stages with it, so an unfed watchdog
 * resets after up to twice this; 10 s keeps a guest starved of host CPU for a few seconds from
 * being reset while it is fed.
 */
export const WATCHDOG_HEARTBEAT_S = 10;
/** panic=N on the trial entry: seconds from a panic to the reboot. */
export const PANIC_REBOOT_S = 3;

/**
 * Kernel arguments of every slot entry. no_timer_check: on a host starved of CPU (load 15+ on 2
 * cores, seen 2026-12-02) the kernel's IO-APIC timer check under TCG fails and panics at boot.
 */
const SLOT_ARGS = "console=ttyS0,115200 loglevel=3 no_timer_check";

// Partition layout (MiB). A slot holds a ~8 MiB kernel and a ~1.5 MiB initramfs.
const ESP_MIB = 16;
const SLOT_MIB = 24;

export interface Part {
  offset: number;
  size: number;
}

export interface Manifest {
  hash: string;
  disk: string;
  slotB: Record<Variant, string>;
  parts: { esp: Part; a: Part; b: Part };
  /** Byte offsets in the disk of grubenv and grubenv2 (each one FAT cluster). */
  envOffsets: [number, number];
  kernelPackage: string;
  versions: typeof VERSIONS;
  sizes: Record<string, number>;
}

/** GRUB's modules: the installer's list (src/install/esp.ts), one for every ESP liken makes. */
import { GRUB_MODULES } from "../src/install/esp.js";
export { GRUB_MODULES };

function run(cmd: string, args: string[], opts: { cwd?: string; input?: Buffer } = {}): string {
  return execFileSync(cmd, args, {
    cwd: opts.cwd,
    input: opts.input,
    encoding: "latin1",
    stdio: [opts.input === undefined ? "ignore" : "pipe", "pipe", "pipe"],
    maxBuffer: 64 * MiB,
  });
}

function dpkgVersion(pkg: string): string {
  return run("dpkg-query", ["-W", "-f=${Version}", pkg]);
}

/** The package linux-image-amd64 depends on, with its version: `linux-image-6.1.0-57-amd64=6.1.192-3`. */
export function kernelPackage(): string {
  // One apt-cache call: on a busy machine each one takes seconds.
  const show = run("apt-cache", ["show", "--no-all-versions", "linux-image-amd64"]);
  const m = /^Depends: (linux-image-[^\s,]+) \(= ([^)\s]+)\)/m.exec(show);
  if (m?.[1] === undefined || m[2] === undefined) {
    throw new Error("apt-cache knows no linux-image-amd64 dependency: run testbed/setup-debian.sh");
  }
  return `${m[1]}=${m[2]}`;
}

export function cacheRoot(): string {
  return process.env.LIKEN_TESTBED_CACHE ?? join(homedir(), ".cache", "liken", "testbed");
}

/** Hash of everything the image is made from: these sources and the packages' versions. */
export function inputHash(kpkg: string): string {
  const h = createHash("sha256");
  for (const f of [
    "testbed/build.ts",
    "testbed/cpio.ts",
    "testbed/init.sh",
    "src/bootloader/grub-cfg.ts",
    "src/bootloader/grub.ts",
    "src/bootloader/grubenv.ts",
    "src/bootloader/envstore.ts",
  ]) {
    h.update(f).update(readFileSync(join(ROOT, f)));
  }
  for (const p of [
    "grub-efi-amd64-bin",
    "busybox-static",
    "mtools",
    "dosfstools",
    "e2fsprogs",
    "gdisk",
  ]) {
    h.update(`${p}=${dpkgVersion(p)}`);
  }
  h.update(kpkg);
  return h.digest("hex").slice(0, 16);
}

/** The watchdog driver and the modules it needs, in load order. */
const WATCHDOG_MODULES = ["watchdog", "i6300esb"];

/** The `depends=` field of a kernel module's .modinfo section (its fields end in NUL bytes). */
export function moduleDepends(ko: Buffer): string[] {
  const at = ko.indexOf("\0depends=");
  if (at < 0) return [];
  const end = ko.indexOf(0, at + 1);
  const v = ko.toString("latin1", at + "\0depends=".length, end);
  return v === "" ? [] : v.split(",");
}

/** The kernel package's .deb (`name=version`), downloaded once into the cache's debs/. */
export function kernelDeb(kpkg: string): string {
  const debs = join(cacheRoot(), "debs");
  mkdirSync(debs, { recursive: true });
  const [name, version] = kpkg.split("=") as [string, string];
  const want = (f: string): boolean => f.startsWith(`${name}_`) && f.endsWith(".deb");
  if (!readdirSync(debs).some(want)) {
    run("apt-get", ["download", "-q", `${name}=${version}`], { cwd: debs });
  }
  const deb = readdirSync(debs).find(want);
  if (deb === undefined) throw new Error(`apt-get download ${kpkg} left no .deb in ${debs}`);
  return join(debs, deb);
}

/** vmlinuz and the watchdog modules from the kernel package, downloaded once into the cache. */
function fetchKernel(kpkg: string, work: string): { vmlinuz: Buffer; modules: Buffer[] } {
  const x = join(work, "kernel");
  mkdirSync(x, { recursive: true });
  const tar = execFileSync("dpkg-deb", ["--fsys-tarfile", kernelDeb(kpkg)], {
    maxBuffer: 2048 * MiB,
  });
  const patterns = WATCHDOG_MODULES.map((mod) => `./lib/modules/*/drivers/watchdog/${mod}.ko*`);
  execFileSync("tar", ["-x", "-C", x, "--wildcards", "./boot/vmlinuz-*", ...patterns], {
    input: tar,
  });
  const boot = readdirSync(join(x, "boot"));
  const vmlinuz = readFileSync(join(x, "boot", boot.find((f) => f.startsWith("vmlinuz-")) ?? ""));
  const modules = WATCHDOG_MODULES.map((mod) => {
    const ko =
      run("find", [join(x, "lib"), "-name", `${mod}.ko*`])
        .trim()
        .split("\n")[0] ?? "";
    if (ko === "") throw new Error(`${kpkg} has no ${mod}.ko`);
    let bytes = readFileSync(ko);
    if (ko.endsWith(".xz")) bytes = execFileSync("xz", ["-dc"], { input: bytes });
    if (ko.endsWith(".zst")) bytes = execFileSync("zstd", ["-dc"], { input: bytes });
    return bytes;
  });
  // Load order must satisfy the modules' own dependencies.
  modules.forEach((ko, i) => {
    for (const dep of moduleDepends(ko)) {
      if (!WATCHDOG_MODULES.slice(0, i).includes(dep)) {
        throw new Error(`${WATCHDOG_MODULES[i]}.ko needs ${dep}.ko, which the testbed lacks`);
      }
    }
  });
  return { vmlinuz, modules };
}

function initramfs(version: string, fault: Variant | "none", modules: Buffer[]): Buffer {
  const init = readFileSync(join(ROOT, "testbed/init.sh"), "latin1")
    .replaceAll("@FAULT@", fault === "good" ? "none" : fault)
    .replaceAll("@DEADLINE@", String(CONFIRM_DEADLINE_S))
    .replaceAll("@HEARTBEAT@", String(WATCHDOG_HEARTBEAT_S));
  const entries: CpioEntry[] = [
    ...["bin", "dev", "etc", "lib", "lib/modules", "proc", "sys", "tmp"].map((d): CpioEntry => ({
      path: d,
      kind: "dir",
    })),
    { path: "dev/console", kind: "chardev", major: 5, minor: 1 },
    { path: "bin/busybox", kind: "file", data: readFileSync("/bin/busybox"), mode: 0o755 },
    { path: "init", kind: "file", data: Buffer.from(init, "latin1"), mode: 0o755 },
    { path: "etc/liken-release", kind: "file", data: Buffer.from(`${version}\n`) },
    ...modules.map((data, i): CpioEntry => ({
      path: `lib/modules/${WATCHDOG_MODULES[i]}.ko`,
      kind: "file",
      data,
    })),
  ];
  return cpioNewc(entries);
}

/** An ext4 slot filesystem image holding the kernel, the initramfs and the release marker. */
function slotImage(
  work: string,
  name: string,
  version: string,
  vmlinuz: Buffer,
  initrd: Buffer,
): string {
  const dir = join(work, `${name}.d`);
  mkdirSync(join(dir, "boot"), { recursive: true });
  writeFileSync(join(dir, "boot", "vmlinuz"), vmlinuz);
  writeFileSync(join(dir, "boot", "initrd.img"), initrd);
  // The release marker the agent writes last into a slot.
  writeFileSync(join(dir, "liken-release"), `${version}\n`);
  const img = join(work, `${name}.ext4`);
  run("mke2fs", ["-q", "-t", "ext4", "-L", `slot-${name}`, "-d", dir, img, `${SLOT_MIB}M`]);
  return img;
}

function espImage(work: string): string {
  const img = join(work, "esp.fat");
  const efi = join(work, "BOOTX64.EFI");
  // The prefix names the ESP, whose /EFI/liken/grub.cfg GRUB's normal module reads at start.
  run("grub-mkimage", [
    "-O",
    "x86_64-efi",
    "-o",
    efi,
    "-p",
    "(hd0,gpt1)/EFI/liken",
    ...GRUB_MODULES,
  ]);
  const slot = (root: string) => ({
    root,
    kernel: "/boot/vmlinuz",
    initrd: "/boot/initrd.img",
    args: SLOT_ARGS,
  });
  const cfg = grubConfig({
    envDir: "(hd0,gpt1)/EFI/liken",
    slots: { a: slot("(hd0,gpt2)"), b: slot("(hd0,gpt3)") },
    trialArgs: `liken.trial=1 panic=${PANIC_REBOOT_S}`,
    serial: true,
  });
  writeFileSync(join(work, "grub.cfg"), cfg);
  const env = initialEnvBlock("a");
  writeFileSync(join(work, "grubenv"), env);
  run("mkfs.vfat", ["-C", img, String(ESP_MIB * 1024)]);
  const m = (args: string[]): string => run(args[0] ?? "", ["-i", img, ...args.slice(1)]);
  m(["mmd", "::/EFI", "::/EFI/BOOT", "::/EFI/liken"]);
  m(["mcopy", efi, "::/EFI/BOOT/BOOTX64.EFI"]);
  m(["mcopy", join(work, "grub.cfg"), "::/EFI/liken/grub.cfg"]);
  for (const f of ENV_FILES) m(["mcopy", join(work, "grubenv"), `::/EFI/liken/${f}`]);
  return img;
}

/** Byte offset inside the FAT image of a file that fills exactly one cluster. */
function fatFileOffset(img: string, path: string): number {
  // The boot sector alone (the image may be large: never the whole file in a Buffer).
  const bs = Buffer.alloc(64);
  const fd = openSync(img, "r");
  try {
    readSync(fd, bs, 0, 64, 0);
  } finally {
    closeSync(fd);
  }
  const bps = bs.readUInt16LE(11);
  const spc = bs.readUInt8(13);
  const reserved = bs.readUInt16LE(14);
  const fats = bs.readUInt8(16);
  const rootEntries = bs.readUInt16LE(17);
  const fatSize = bs.readUInt16LE(22) || bs.readUInt32LE(36);
  const firstData = reserved + fats * fatSize + Math.ceil((rootEntries * 32) / bps);
  const out = run("mshowfat", ["-i", img, `::${path}`]);
  const m = /<(\d+)>/.exec(out);
  if (m?.[1] === undefined || spc * bps < 1024) {
    throw new Error(`${path} is not one cluster in ${img}: mshowfat says ${out.trim()}`);
  }
  return (firstData + (Number(m[1]) - 2) * spc) * bps;
}

function assemble(
  work: string,
  esp: string,
  slotA: string,
  slotB: string,
): { disk: string; parts: Manifest["parts"] } {
  const disk = join(work, "disk.img");
  const total = 1 + ESP_MIB + 2 * SLOT_MIB + 1;
  run("truncate", ["-s", `${total}M`, disk]);
  run("sgdisk", [
    "-o",
    "-n",
    `1:1M:+${ESP_MIB}M`,
    "-t",
    "1:ef00",
    "-c",
    "1:ESP",
    "-n",
    `2:0:+${SLOT_MIB}M`,
    "-t",
    "2:8300",
    "-c",
    "2:slot-a",
    "-n",
    `3:0:+${SLOT_MIB}M`,
    "-t",
    "3:8300",
    "-c",
    "3:slot-b",
    disk,
  ]);
  const parts = {
    esp: { offset: 1 * MiB, size: ESP_MIB * MiB },
    a: { offset: (1 + ESP_MIB) * MiB, size: SLOT_MIB * MiB },
    b: { offset: (1 + ESP_MIB + SLOT_MIB) * MiB, size: SLOT_MIB * MiB },
  };
  const place = (src: string, p: Part): void => {
    run("dd", [
      `if=${src}`,
      `of=${disk}`,
      "bs=1M",
      `seek=${p.offset / MiB}`,
      "conv=notrunc",
      "status=none",
    ]);
  };
  place(esp, parts.esp);
  place(slotA, parts.a);
  place(slotB, parts.b);
  return { disk, parts };
}

/** Whether process `pid` still runs (a build's temporary directory names its builder). */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

export function buildTestbed(log: (s: string) => void = () => {}): Manifest {
  const kpkg = kernelPackage();
  const hash = inputHash(kpkg);
  const dir = join(cacheRoot(), hash);
  const manifestPath = join(dir, "manifest.json");
  if (existsSync(manifestPath)) return JSON.parse(readFileSync(manifestPath, "utf8")) as Manifest;
  const t0 = Date.now();
  const work = `${dir}.tmp-${process.pid}`;
  rmSync(work, { recursive: true, force: true });
  mkdirSync(work, { recursive: true });
  log(`testbed: building image ${hash} (${kpkg}) in ${work}`);
  const { vmlinuz, modules } = fetchKernel(kpkg, work);
  const slotA = slotImage(work, "a", VERSIONS.a, vmlinuz, initramfs(VERSIONS.a, "good", modules));
  const slotB = Object.fromEntries(
    VARIANTS.map((v) => [
      v,
      slotImage(work, `b-${v}`, VERSIONS.b, vmlinuz, initramfs(VERSIONS.b, v, modules)),
    ]),
  ) as Record<Variant, string>;
  const esp = espImage(work);
  const envInEsp = ENV_FILES.map((f) => fatFileOffset(esp, `/EFI/liken/${f}`));
  const { disk, parts } = assemble(work, esp, slotA, slotB.good);
  const envOffsets = envInEsp.map((o) => parts.esp.offset + o) as [number, number];
  // Check the offsets: the disk must hold the env block bytes exactly there.
  const diskBytes = readFileSync(disk);
  const env = initialEnvBlock("a");
  for (const o of envOffsets) {
    if (!diskBytes.subarray(o, o + env.length).equals(env)) {
      throw new Error(`grubenv not found at disk offset ${o}: the FAT layout reading is wrong`);
    }
  }
  rmSync(join(work, "kernel"), { recursive: true, force: true });
  for (const d of readdirSync(work))
    if (d.endsWith(".d")) rmSync(join(work, d), { recursive: true });
  const rel = (p: string): string => p.replace(work, dir);
  const sizes: Record<string, number> = {
    disk: diskBytes.length,
    vmlinuz: vmlinuz.length,
    initrd: initramfs(VERSIONS.a, "good", modules).length,
    grubEfi: readFileSync(join(work, "BOOTX64.EFI")).length,
  };
  const manifest: Manifest = {
    hash,
    disk: rel(disk),
    slotB: Object.fromEntries(VARIANTS.map((v) => [v, rel(slotB[v])])) as Record<Variant, string>,
    parts,
    envOffsets,
    kernelPackage: kpkg,
    versions: VERSIONS,
    sizes,
  };
  writeFileSync(join(work, "manifest.json"), `${JSON.stringify(manifest, null, 2)}\n`);
  rmSync(dir, { recursive: true, force: true });
  renameSync(work, dir);
  // Earlier builds are dead weight (~140 MiB each); one untouched for an hour is no longer used
  // by a run in progress.
  for (const d of readdirSync(cacheRoot())) {
    const p = join(cacheRoot(), d);
    const idle = Date.now() - statSync(p).mtimeMs > 3600_000;
    if (/^[0-9a-f]{16}$/.test(d) && d !== hash && idle) rmSync(p, { recursive: true });
    // A build that was killed leaves `<hash>.tmp-<pid>` behind.
    const tmp = /\.tmp-(\d+)$/.exec(d);
    if (tmp?.[1] !== undefined && !alive(Number(tmp[1]))) rmSync(p, { recursive: true });
  }
  log(
    `testbed: built ${hash} in ${((Date.now() - t0) / 1000).toFixed(1)} s: ${JSON.stringify(sizes)}`,
  );
  return manifest;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const m = buildTestbed((s) => console.error(s));
  console.log(JSON.stringify(m, null, 2));
}
