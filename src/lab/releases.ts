// The lab's releases: small artifacts built on the spot with liken's own release tooling
// (the same `buildRelease` behind `liken release build`), published into a local channel. The
// lab's second release is built as an adopter builds one (docs/day-1.md): a Containerfile,
// built by buildah into an OCI layout, then `liken release build --from-image`
// (buildLabImageRelease).
//
// A lab "kernel" is a small text header plus filler; the simulated machine's firmware reads
// the header of the slot it boots to learn how that kernel behaves on its trial, so "a
// release whose kernel fails its trial" is a property of the release bytes, as on a real
// machine, not a flag on the machine.
import { createHash } from "node:crypto";
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { buildRelease } from "../release/build.js";
import { withBuildah } from "../release/from-image/containerfile.js";
import { buildReleaseFromImage } from "../release/from-image/from-image.js";

export const LAB_KERNEL_MAGIC = "LIKEN-LAB-KERNEL/1";
/**
 * kubelet-down: the kernel boots, the agent runs, the kubelet never starts (lab machine.ts).
 * bad-after-promotion: it boots, proves and passes its gates; an hour after each boot on the
 * lab's clock its service gate fails (health-gate.ts).
 */
export type LabKernelBehaviour = "ok" | "panic" | "hang" | "kubelet-down" | "bad-after-promotion";

export interface LabRelease {
  version: string;
  digest: string;
  behaviour: LabKernelBehaviour;
}

/**
 * Deterministic filler (a SHA-256 chain from the seed), so two builds of one version are
 * byte-identical and two versions differ in every block. The agent's fleet tests use it too.
 */
export function filler(seed: string, size: number): Buffer {
  const out = Buffer.alloc(size);
  let block = createHash("sha256").update(seed).digest();
  for (let off = 0; off < size; off += block.length) {
    block.copy(out, off);
    block = createHash("sha256").update(block).digest();
  }
  return out;
}

export function labKernel(
  version: string,
  behaviour: LabKernelBehaviour,
  size = 64 * 1024,
): Buffer {
  const header = Buffer.from(
    `${LAB_KERNEL_MAGIC}\nversion: ${version}\nbehaviour: ${behaviour}\n\n`,
  );
  return Buffer.concat([header, filler(`kernel ${version}`, size - header.length)]);
}

/** How the kernel at the start of `bytes` behaves when booted; "ok" for anything unknown. */
export function kernelBehaviour(bytes: Buffer): LabKernelBehaviour {
  const text = bytes.subarray(0, 256).toString("latin1");
  if (!text.startsWith(LAB_KERNEL_MAGIC)) return "ok";
  const m = /\nbehaviour: (ok|panic|hang|kubelet-down|bad-after-promotion)\n/.exec(text);
  return (m?.[1] as LabKernelBehaviour | undefined) ?? "ok";
}

/** Builds one lab release (kernel + rootfs) into the channel directory. */
export async function buildLabRelease(
  channelDir: string,
  workDir: string,
  version: string,
  behaviour: LabKernelBehaviour = "ok",
  rootfsSize = 1024 * 1024,
  /** release.yaml revertFloor: the oldest release a revert of this one may go back to. */
  revertFloor?: string,
): Promise<LabRelease> {
  const src = path.join(workDir, "artifacts", version);
  mkdirSync(src, { recursive: true });
  const kernel = path.join(src, "vmlinuz");
  const rootfs = path.join(src, "rootfs.img");
  writeFileSync(kernel, labKernel(version, behaviour));
  writeFileSync(rootfs, filler(`rootfs ${version}`, rootfsSize));
  const built = await buildRelease({
    version,
    out: channelDir,
    artifacts: [
      { name: "kernel", file: kernel },
      { name: "rootfs", file: rootfs },
    ],
    ...(revertFloor === undefined ? {} : { revertFloor }),
  });
  return { version, digest: built.digest, behaviour };
}

/** The lab image's kernel version: its place is /usr/lib/modules/<this>/vmlinuz (bootc's). */
export const LAB_KERNEL_VERSION = "6.1.0-lab";
/** The lab's machines' slot size (machine.ts's default): a from-image release must fit it. */
export const LAB_SLOT_BYTES = 8 * 1024 * 1024;
/** SOURCE_DATE_EPOCH of the lab's images: 2026-10-01, so a rebuild gives the same digest. */
const LAB_EPOCH = 1790812800;

/** The Containerfile of a lab release: no base, the files in rootfs/ of its context. */
export function labContainerfile(version: string): string {
  return [
    "# A liken release: the root filesystem, its kernel and initrd at bootc's places",
    "# (/usr/lib/modules/<version>/vmlinuz and initramfs.img). docs/day-1.md.",
    "FROM scratch",
    "COPY rootfs/ /",
    `LABEL org.opencontainers.image.version=${version}`,
    "",
  ].join("\n");
}

/**
 * A lab release built from a Containerfile: its context (the Containerfile and rootfs/ with
 * /etc/os-release and the lab kernel and initrd) under `workDir`/containerfile/<version>,
 * built by buildah (src/release/from-image/containerfile.ts) into `workDir`/images, then
 * `liken release build --from-image oci:<layout>:<version>` (its code) into the channel. The
 * release's rootfs (ext4) sits at the slot's offset 0, the kernel after it; the lab firmware
 * reads a "ok" kernel from a slot that does not start with a lab kernel (processes.ts).
 */
export async function buildLabImageRelease(
  channelDir: string,
  workDir: string,
  version: string,
): Promise<LabRelease> {
  const context = path.join(workDir, "containerfile", version);
  const root = path.join(context, "rootfs");
  const modules = path.join(root, "usr/lib/modules", LAB_KERNEL_VERSION);
  rmSync(context, { recursive: true, force: true });
  mkdirSync(modules, { recursive: true });
  mkdirSync(path.join(root, "etc"), { recursive: true });
  writeFileSync(path.join(modules, "vmlinuz"), labKernel(version, "ok"));
  writeFileSync(path.join(modules, "initramfs.img"), filler(`initrd ${version}`, 16 * 1024));
  writeFileSync(
    path.join(root, "etc/os-release"),
    `NAME="liken lab"\nID=liken-lab\nVERSION="${version}"\nVERSION_ID="${version}"\n`,
  );
  const containerfile = labContainerfile(version);
  writeFileSync(path.join(context, "Containerfile"), containerfile);
  const layout = path.join(workDir, "images");
  const ref = await withBuildah({ workDir, sourceDateEpoch: LAB_EPOCH }, (b) =>
    b.build({ containerfile, context, layout, name: version }),
  );
  const built = await buildReleaseFromImage({
    ref,
    out: channelDir,
    slotSizeBytes: LAB_SLOT_BYTES,
    sourceDateEpoch: LAB_EPOCH,
    workDir,
  });
  return { version, digest: built.digest, behaviour: "ok" };
}
