// The lab's releases: small artifacts built on the spot with liken's own release tooling
// (the same `buildRelease` behind `liken release build`), published into a local channel.
//
// A lab "kernel" is a small text header plus filler; the simulated machine's firmware reads
// the header of the slot it boots to learn how that kernel behaves on its trial, so "a
// release whose kernel fails its trial" is a property of the release bytes, as on a real
// machine, not a flag on the machine.
import { createHash } from "node:crypto";
import { mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { buildRelease } from "../release/build.js";

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
  });
  return { version, digest: built.digest, behaviour };
}
