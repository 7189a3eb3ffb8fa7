// Whole builds of small images with the real mke2fs, debugfs and e2fsck, for what only a real
// filesystem shows: a /boot that a later layer brings (the GRUB links go in it after it is
// made), and an image that has /lost+found (mke2fs made one already).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { execFileSync } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { buildReleaseFromImage } from "../../src/release/from-image/from-image.js";
import { bootcKernel, writeLayout, type TarEntry } from "../support/oci-layout.js";

const MiB = 1024 * 1024;
let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "liken-image-build-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const debugfs = (img: string, cmd: string): string =>
  execFileSync("debugfs", ["-R", cmd, img], {
    encoding: "utf8",
    stdio: ["ignore", "pipe", "ignore"],
  });

/** A base with no /boot, as debian:stable-slim is. */
const base: TarEntry[] = [
  { name: "etc/", type: "directory" },
  { name: "etc/os-release", content: "ID=test\n" },
  { name: "usr/", type: "directory" },
  { name: "usr/bin/", type: "directory" },
  { name: "usr/bin/sh", content: "sh\n", mode: 0o755 },
];

/** What `RUN apt-get install linux-image-amd64` adds on top. */
const kernelLayer: TarEntry[] = [
  { name: "boot/", type: "directory" },
  { name: "boot/vmlinuz-6.1.0-test", content: "kernel\n" },
  { name: "boot/initrd.img-6.1.0-test", content: "initrd\n" },
  { name: "usr/lib/", type: "directory" },
  { name: "usr/lib/modules/", type: "directory" },
  { name: "usr/lib/modules/6.1.0-test/", type: "directory" },
];

async function build(name: string, layers: TarEntry[][]): Promise<string> {
  const l = await writeLayout(path.join(dir, name), layers);
  const r = await buildReleaseFromImage({
    ref: l.dir,
    out: path.join(dir, `${name}-channel`),
    slotSizeBytes: 16 * MiB,
    version: "v1",
  });
  const img = path.join(r.dir, "rootfs.img");
  execFileSync("e2fsck", ["-fn", img], { stdio: "ignore" }); // throws on any error
  return img;
}

describe("liken release build --from-image, on a real ext4", () => {
  it("builds an image whose /boot first appears in a later layer", async () => {
    const img = await build("late-boot", [base, kernelLayer]);
    expect(debugfs(img, "stat /boot/vmlinuz")).toContain(
      'Fast link dest: "../boot/vmlinuz-6.1.0-test"',
    );
    expect(debugfs(img, "stat /boot/initrd.img")).toContain(
      'Fast link dest: "../boot/initrd.img-6.1.0-test"',
    );
    expect(debugfs(img, "cat /boot/vmlinuz-6.1.0-test")).toBe("kernel\n");
  });

  it("builds an image that has /lost+found, with the image's mode and owner", async () => {
    const img = await build("lost-found", [
      [
        ...base,
        { name: "lost+found/", type: "directory", mode: 0o750, uid: 7, gid: 8 },
        { name: "lost+found/#12", content: "what fsck found\n" },
        ...bootcKernel(),
      ],
    ]);
    expect(debugfs(img, "stat /lost+found")).toMatch(/Mode:\s+0750[\s\S]*User:\s+7\s+Group:\s+8/);
    expect(debugfs(img, "cat /lost+found/#12")).toBe("what fsck found\n");
  });
});
