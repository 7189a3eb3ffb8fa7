// The debugfs script that fills an empty ext4 with a tree: paths in byte order of their names,
// parents before children, one `write` per inode and `ln` for its other names, every owner,
// mode, link count and time set from the tree, names quoted for debugfs; mke2fs's /lost+found
// taken as the image's.
import { describe, expect, it } from "vitest";
import { findBootArtifacts, linkGrubBootFiles } from "../../src/release/from-image/boot.js";
import { ext4Needs, ext4Script } from "../../src/release/from-image/fs.js";
import { Tree, type Meta } from "../../src/release/from-image/tree.js";

const m = (mode: number, uid = 0, gid = 0, mtime = 100): Meta => ({ mode, uid, gid, mtime });

function sample(): Tree {
  const t = new Tree("/c", m(0o755));
  t.paths.set("usr", { kind: "dir", meta: m(0o755) });
  t.paths.set("b", { kind: "dir", meta: m(0o700, 1000, 1000) });
  t.paths.set("usr/Z", { kind: "symlink", target: "/etc/x", meta: m(0o777) });
  const a = t.newContent();
  t.addFile("usr/a", a.ino, a.content, m(0o4755), 10);
  t.paths.set("b/link", { kind: "file", ino: a.ino });
  const q = t.newContent();
  t.addFile('usr/say "hi"', q.ino, q.content, m(0o644), 3);
  return t;
}

describe("ext4Script", () => {
  it("creates in byte order, sets everything, quotes names", () => {
    expect(ext4Script(sample()).trimEnd().split("\n")).toEqual([
      'mkdir "b"',
      'cd "/b"',
      'write "/c/1" "link"',
      'cd "/"',
      'mkdir "usr"',
      'cd "/usr"',
      'symlink "Z" "/etc/x"',
      'ln "/b/link" "a"',
      'write "/c/2" "say ""hi"""',
      "cd /",
      'sif "/" mode 040755',
      'sif "/" uid 0',
      'sif "/" gid 0',
      'sif "/" atime @100',
      'sif "/" mtime @100',
      'sif "/" ctime @100',
      'sif "/" crtime @100',
      'sif "/b" mode 040700',
      'sif "/b" uid 1000',
      'sif "/b" gid 1000',
      'sif "/b" atime @100',
      'sif "/b" mtime @100',
      'sif "/b" ctime @100',
      'sif "/b" crtime @100',
      'sif "/b/link" mode 0104755',
      'sif "/b/link" uid 0',
      'sif "/b/link" gid 0',
      'sif "/b/link" atime @100',
      'sif "/b/link" mtime @100',
      'sif "/b/link" ctime @100',
      'sif "/b/link" crtime @100',
      'sif "/b/link" links_count 2',
      'sif "/usr" mode 040755',
      'sif "/usr" uid 0',
      'sif "/usr" gid 0',
      'sif "/usr" atime @100',
      'sif "/usr" mtime @100',
      'sif "/usr" ctime @100',
      'sif "/usr" crtime @100',
      'sif "/usr/Z" mode 0120777',
      'sif "/usr/Z" uid 0',
      'sif "/usr/Z" gid 0',
      'sif "/usr/Z" atime @100',
      'sif "/usr/Z" mtime @100',
      'sif "/usr/Z" ctime @100',
      'sif "/usr/Z" crtime @100',
      'sif "/usr/say ""hi""" mode 0100644',
      'sif "/usr/say ""hi""" uid 0',
      'sif "/usr/say ""hi""" gid 0',
      'sif "/usr/say ""hi""" atime @100',
      'sif "/usr/say ""hi""" mtime @100',
      'sif "/usr/say ""hi""" ctime @100',
      'sif "/usr/say ""hi""" crtime @100',
    ]);
  });

  it("makes a parent before its children, whatever layer (or none) each is recorded with", () => {
    // /boot came with the kernel's layer; the GRUB links added after unpacking have no layer.
    const t = new Tree("/c", m(0o755));
    t.paths.set("etc", { kind: "dir", meta: m(0o755) });
    t.paths.set("boot", { kind: "dir", meta: m(0o755) });
    t.layerOf.set("boot", 1);
    const k = t.newContent();
    t.addFile("boot/vmlinuz-6.1", k.ino, k.content, m(0o644), 1);
    t.layerOf.set("boot/vmlinuz-6.1", 1);
    linkGrubBootFiles(t, findBootArtifacts(t), 100);
    expect(t.creationOrder()).toEqual(["etc", "boot", "boot/vmlinuz", "boot/vmlinuz-6.1"]);
    const lines = ext4Script(t).split("\n");
    expect(lines.indexOf('mkdir "boot"')).toBeLessThan(lines.indexOf('cd "/boot"'));
  });

  it("takes mke2fs's /lost+found as the image's, with the image's mode and owner", () => {
    const t = new Tree("/c", m(0o755));
    t.paths.set("lost+found", { kind: "dir", meta: m(0o700, 3, 4) });
    const f = t.newContent();
    t.addFile("lost+found/#7", f.ino, f.content, m(0o644), 1);
    t.paths.set("opt", { kind: "dir", meta: m(0o755) });
    t.paths.set("opt/lost+found", { kind: "dir", meta: m(0o755) });
    const lines = ext4Script(t).split("\n");
    // The root's is mke2fs's: not made again; /opt's is the image's own.
    expect(lines.slice(0, 7)).toEqual([
      'cd "/lost+found"',
      'write "/c/1" "#7"',
      'cd "/"',
      'mkdir "opt"',
      'cd "/opt"',
      'mkdir "lost+found"',
      "cd /",
    ]);
    expect(lines).toEqual(
      expect.arrayContaining([
        'sif "/lost+found" mode 040700',
        'sif "/lost+found" uid 3',
        'sif "/lost+found" gid 4',
      ]),
    );
  });

  it("refuses a /lost+found that is not a directory (e2fsck would replace it)", () => {
    const t = new Tree("/c", m(0o755));
    t.paths.set("lost+found", { kind: "symlink", target: "/tmp", meta: m(0o777) });
    expect(() => ext4Script(t)).toThrow(
      expect.objectContaining({
        code: "LIKEN_IMAGE_LAYER_ENTRY",
        message: expect.stringContaining("/lost+found is a symlink in the image"),
      }),
    );
  });

  it("refuses a name with a line break", () => {
    const t = new Tree("/c");
    t.paths.set("a\nb", { kind: "dir", meta: m(0o755) });
    expect(() => ext4Script(t)).toThrow(
      expect.objectContaining({ code: "LIKEN_IMAGE_LAYER_ENTRY" }),
    );
  });

  it("counts the blocks and inodes the tree needs", () => {
    // Inodes: the root, b and usr, the symlink, two files (the hard link is the first's).
    // Blocks: a directory block each for the root, b and usr, one for each small file (the
    // symlink's target fits its inode).
    expect(ext4Needs(sample())).toEqual({ blocks: 5, inodes: 6 });
  });
});

describe("treeFromDirectory", () => {
  it("reads a host directory: hard links as one inode, a fifo refused or skipped", async () => {
    const { mkdtemp, mkdir, writeFile, link, symlink, rm } = await import("node:fs/promises");
    const { execFileSync } = await import("node:child_process");
    const { tmpdir } = await import("node:os");
    const path = await import("node:path");
    const { treeFromDirectory } = await import("../../src/release/from-image/tree.js");
    const dir = await mkdtemp(path.join(tmpdir(), "liken-tree-"));
    try {
      await mkdir(path.join(dir, "etc"));
      await writeFile(path.join(dir, "etc/a"), "a");
      await link(path.join(dir, "etc/a"), path.join(dir, "b"));
      await symlink("etc/a", path.join(dir, "c"));
      const t = await treeFromDirectory(dir);
      expect(t.walk()).toEqual(["b", "c", "etc", "etc/a"]);
      expect(t.paths.get("b")).toEqual(t.paths.get("etc/a"));
      expect(t.paths.get("c")).toMatchObject({ kind: "symlink", target: "etc/a" });
      execFileSync("mkfifo", [path.join(dir, "etc/fifo")]);
      await expect(treeFromDirectory(dir)).rejects.toMatchObject({
        code: "LIKEN_IMAGE_LAYER_DEVICE",
      });
      expect((await treeFromDirectory(dir, { special: "skip" })).paths.has("etc/fifo")).toBe(false);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
