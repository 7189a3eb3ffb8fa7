// Finding an image's kernel and initrd: bootc's /usr/lib/modules/<v>/vmlinuz, /boot's
// vmlinuz-<v>; none, or two without --kernel-version, is refused.
import { describe, expect, it } from "vitest";
import { findBootArtifacts, linkGrubBootFiles } from "../../src/release/from-image/boot.js";
import { Tree } from "../../src/release/from-image/tree.js";

const meta = { mode: 0o644, uid: 0, gid: 0, mtime: 0 };

function treeOf(files: string[]): Tree {
  const t = new Tree("/nonexistent");
  for (const p of files) {
    const parts = p.split("/");
    for (let i = 1; i < parts.length; i++) {
      t.paths.set(parts.slice(0, i).join("/"), { kind: "dir", meta: { ...meta, mode: 0o755 } });
    }
    const { ino, content } = t.newContent();
    t.addFile(p, ino, content, meta, 1);
  }
  return t;
}

describe("findBootArtifacts", () => {
  it.each<[string, string[], string | undefined, object]>([
    [
      "bootc",
      ["usr/lib/modules/6.12.1/vmlinuz", "usr/lib/modules/6.12.1/initramfs.img"],
      undefined,
      {
        version: "6.12.1",
        kernel: "usr/lib/modules/6.12.1/vmlinuz",
        initrd: "usr/lib/modules/6.12.1/initramfs.img",
      },
    ],
    [
      "Debian's /boot",
      [
        "boot/vmlinuz-6.1.0-40-amd64",
        "boot/initrd.img-6.1.0-40-amd64",
        "boot/config-6.1.0-40-amd64",
      ],
      undefined,
      {
        version: "6.1.0-40-amd64",
        kernel: "boot/vmlinuz-6.1.0-40-amd64",
        initrd: "boot/initrd.img-6.1.0-40-amd64",
      },
    ],
    [
      "Fedora's /boot",
      ["boot/vmlinuz-6.11.4-301.fc41.x86_64", "boot/initramfs-6.11.4-301.fc41.x86_64.img"],
      undefined,
      { version: "6.11.4-301.fc41.x86_64", initrd: "boot/initramfs-6.11.4-301.fc41.x86_64.img" },
    ],
    [
      "the same version in both places: bootc's",
      ["usr/lib/modules/6.12.1/vmlinuz", "boot/vmlinuz-6.12.1"],
      undefined,
      { version: "6.12.1", kernel: "usr/lib/modules/6.12.1/vmlinuz" },
    ],
    [
      "a kernel without initrd",
      ["usr/lib/modules/6.12.1/vmlinuz"],
      undefined,
      { version: "6.12.1" },
    ],
    [
      "two kernels and the flag",
      ["usr/lib/modules/6.12.1/vmlinuz", "usr/lib/modules/6.12.2/vmlinuz"],
      "6.12.2",
      { version: "6.12.2", kernel: "usr/lib/modules/6.12.2/vmlinuz" },
    ],
  ])("%s", (_name, files, flag, want) => {
    expect(findBootArtifacts(treeOf(files), flag)).toMatchObject(want);
  });

  it("refuses an image with no kernel", () => {
    expect(() =>
      findBootArtifacts(treeOf(["usr/lib/modules/6.12.1/modules.dep", "boot/grub/grub.cfg"])),
    ).toThrow(
      expect.objectContaining({
        code: "LIKEN_IMAGE_NO_KERNEL",
        message: expect.stringContaining(
          "the image has no kernel at /usr/lib/modules/<version>/vmlinuz",
        ),
      }),
    );
  });

  it("refuses two kernels without --kernel-version, naming both", () => {
    expect(() =>
      findBootArtifacts(treeOf(["usr/lib/modules/6.12.1/vmlinuz", "boot/vmlinuz-6.1.0-40-amd64"])),
    ).toThrow(
      expect.objectContaining({
        code: "LIKEN_IMAGE_KERNEL_AMBIGUOUS",
        message: expect.stringContaining(
          "6.1.0-40-amd64: /boot/vmlinuz-6.1.0-40-amd64; 6.12.1: /usr/lib/modules/6.12.1/vmlinuz",
        ),
      }),
    );
  });

  it("refuses a --kernel-version the image does not have", () => {
    expect(() => findBootArtifacts(treeOf(["usr/lib/modules/6.12.1/vmlinuz"]), "6.13")).toThrow(
      expect.objectContaining({
        code: "LIKEN_IMAGE_NO_KERNEL",
        message: expect.stringContaining("it has 6.12.1"),
      }),
    );
  });

  it("links /boot/vmlinuz and /boot/initrd.img for GRUB, keeping a file the image has there", () => {
    const t = treeOf(["usr/lib/modules/6.12.1/vmlinuz", "usr/lib/modules/6.12.1/initramfs.img"]);
    linkGrubBootFiles(t, findBootArtifacts(t), 7);
    expect(t.paths.get("boot/vmlinuz")).toMatchObject({
      kind: "symlink",
      target: "../usr/lib/modules/6.12.1/vmlinuz",
    });
    expect(t.paths.get("boot/initrd.img")).toMatchObject({
      kind: "symlink",
      target: "../usr/lib/modules/6.12.1/initramfs.img",
    });
    const t2 = treeOf(["boot/vmlinuz", "boot/vmlinuz-6.1.0"]);
    linkGrubBootFiles(t2, findBootArtifacts(t2), 7);
    expect(t2.paths.get("boot/vmlinuz")!.kind).toBe("file");
  });
});
