// Applying an image's layers: later entries replace earlier ones, whiteouts remove, opaque
// directories hide a lower layer's content but not their own layer's; and each refusal (an
// entry that escapes the root, one written through a symlink, a device node, a whiteout of
// nothing) names the layer and the entry.
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { unpackLayers, type LayerSource } from "../../src/release/from-image/unpack.js";
import type { Tree } from "../../src/release/from-image/tree.js";
import { tarOf, type TarEntry } from "../support/oci-layout.js";

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "liken-unpack-"));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const EPOCH = 1_750_000_000;

async function unpack(...layers: TarEntry[][]): Promise<Tree> {
  const sources: LayerSource[] = [];
  for (const [i, l] of layers.entries()) {
    const file = path.join(dir, `layer${i}.tar`);
    await writeFile(file, await tarOf(l));
    sources.push({ name: `layer ${i}`, file, mediaType: "application/vnd.oci.image.layer.v1.tar" });
  }
  return unpackLayers(sources, { contentDir: path.join(dir, "content"), sourceDateEpoch: EPOCH });
}

const paths = (t: Tree): string[] => t.walk();
const text = async (t: Tree, p: string): Promise<string> => readFile(t.file(p)!.content, "utf8");

describe("unpackLayers", () => {
  it("applies layers in order: replace, whiteout, opaque directory", async () => {
    const t = await unpack(
      [
        { name: "etc/", type: "directory" },
        { name: "etc/a", content: "a1" },
        { name: "etc/b", content: "b1" },
        { name: "opt/", type: "directory" },
        { name: "opt/old", content: "old" },
        { name: "opt/sub/x", content: "x" },
        { name: "bin", type: "symlink", linkname: "usr/bin" },
      ],
      [
        { name: "etc/a", content: "a2" },
        { name: "etc/.wh.b" },
        { name: "opt/new", content: "new" },
        { name: "opt/.wh..wh..opq" },
      ],
    );
    expect(paths(t)).toEqual(["bin", "etc", "etc/a", "opt", "opt/new"]);
    expect(await text(t, "etc/a")).toBe("a2");
    expect(await text(t, "opt/new")).toBe("new");
  });

  it("keeps owners, modes and set-uid bits without root, and clamps times", async () => {
    const t = await unpack([
      { name: "usr/bin/su", content: "su", mode: 0o4755, uid: 0, gid: 0, mtime: EPOCH + 99 },
      { name: "home/u/f", content: "f", mode: 0o600, uid: 1000, gid: 1001, mtime: 5 },
    ]);
    expect(t.file("usr/bin/su")!.meta).toEqual({ mode: 0o4755, uid: 0, gid: 0, mtime: EPOCH });
    expect(t.file("home/u/f")!.meta).toEqual({ mode: 0o600, uid: 1000, gid: 1001, mtime: 5 });
    // Parents no entry names are directories made at the epoch.
    expect(t.paths.get("home/u")).toEqual({
      kind: "dir",
      meta: { mode: 0o755, uid: 0, gid: 0, mtime: EPOCH },
    });
  });

  it("with no epoch, clamps nothing and dates the directories no entry names by the newest mtime", async () => {
    const file = path.join(dir, "layer0.tar");
    await writeFile(
      file,
      await tarOf([
        { name: "usr/bin/su", content: "su", mtime: 4_000_000_000 },
        { name: "etc/", type: "directory", mtime: 5 },
        { name: "etc/gone", content: "x", mtime: 4_100_000_000 },
        { name: "etc/.wh.gone" },
      ]),
    );
    const t = await unpackLayers(
      [{ name: "layer 0", file, mediaType: "application/vnd.oci.image.layer.v1.tar" }],
      { contentDir: path.join(dir, "content") },
    );
    expect(t.file("usr/bin/su")!.meta.mtime).toBe(4_000_000_000);
    // The root and /usr, /usr/bin: the newest of what is left (not the whited-out file's).
    for (const p of ["", "usr", "usr/bin"]) {
      expect(t.paths.get(p)).toMatchObject({ kind: "dir", meta: { mtime: 4_000_000_000 } });
    }
    expect(t.paths.get("etc")).toMatchObject({ meta: { mtime: 5 } });
    expect(t.newestMtime()).toBe(4_000_000_000);
  });

  it("keeps hard links as one inode, and a file replaced later breaks the link", async () => {
    const t = await unpack(
      [
        { name: "a", content: "same" },
        { name: "b", type: "link", linkname: "a" },
      ],
      [{ name: "a", content: "new" }],
    );
    expect(await text(t, "b")).toBe("same");
    expect(await text(t, "a")).toBe("new");
    const t2 = await unpack([
      { name: "a", content: "same" },
      { name: "b", type: "link", linkname: "/a" },
    ]);
    const e = (p: string): unknown => t2.paths.get(p);
    expect(e("a")).toEqual(e("b"));
  });

  it("a directory over a file replaces it; a file over a directory removes what was under it", async () => {
    const t = await unpack(
      [
        { name: "x", content: "file" },
        { name: "d/inner", content: "i" },
      ],
      [
        { name: "x/", type: "directory" },
        { name: "d", content: "now a file" },
      ],
    );
    expect(paths(t)).toEqual(["d", "x"]);
    expect(t.paths.get("x")!.kind).toBe("dir");
  });

  it.each<[string, TarEntry[][], string, RegExp]>([
    [
      "an entry with ..",
      [[{ name: "etc/../../escape", content: "x" }]],
      "LIKEN_IMAGE_LAYER_ESCAPES",
      /^layer 0 entry "etc\/\.\.\/\.\.\/escape": the path has "\.\."/,
    ],
    [
      "a hard link with ..",
      [[{ name: "l", type: "link", linkname: "../../etc/shadow" }]],
      "LIKEN_IMAGE_LAYER_ESCAPES",
      /hard link to "\.\.\/\.\.\/etc\/shadow"/,
    ],
    [
      "an entry written through an absolute symlink of a lower layer",
      [
        [{ name: "evil", type: "symlink", linkname: "/root/.ssh" }],
        [{ name: "evil/authorized_keys", content: "key" }],
      ],
      "LIKEN_IMAGE_LAYER_ESCAPES",
      /^layer 1 entry "evil\/authorized_keys": the path goes through the symlink \/evil -> \/root\/\.ssh/,
    ],
    [
      "an entry written through a symlink of its own layer",
      [
        [
          { name: "up", type: "symlink", linkname: "../../.." },
          { name: "up/tmp/x", content: "x" },
        ],
      ],
      "LIKEN_IMAGE_LAYER_ESCAPES",
      /the path goes through the symlink \/up -> \.\.\/\.\.\/\.\./,
    ],
    [
      "a character device",
      [[{ name: "dev/sda", type: "character-device" }]],
      "LIKEN_IMAGE_LAYER_DEVICE",
      /^layer 0 entry "dev\/sda": a character-device \(\/dev\/sda\)/,
    ],
    [
      "a block device",
      [[{ name: "dev/vda", type: "block-device" }]],
      "LIKEN_IMAGE_LAYER_DEVICE",
      /a block-device/,
    ],
    [
      "a whiteout of a path no lower layer has",
      [[{ name: "etc/a", content: "a" }], [{ name: "etc/.wh.b" }]],
      "LIKEN_IMAGE_WHITEOUT_MISSING",
      /^layer 1 entry "etc\/\.wh\.b": a whiteout of \/etc\/b, which no lower layer has/,
    ],
    [
      "an opaque whiteout of a directory no lower layer has",
      [[{ name: "etc/a", content: "a" }], [{ name: "var/.wh..wh..opq" }]],
      "LIKEN_IMAGE_WHITEOUT_MISSING",
      /an opaque whiteout of \/var/,
    ],
    [
      "a hard link to what is not there",
      [[{ name: "b", type: "link", linkname: "a" }]],
      "LIKEN_IMAGE_LAYER_ENTRY",
      /a hard link to \/a, which is not in the image/,
    ],
  ])("refuses %s", async (_name, layers, code, message) => {
    await expect(unpack(...layers)).rejects.toMatchObject({
      code,
      message: expect.stringMatching(message),
    });
  });

  it("orders creation by the layer a path first appeared in: an added layer appends", async () => {
    const t = await unpack(
      [
        { name: "etc/a", content: "a" },
        { name: "etc/c", content: "c" },
        { name: "usr/z", content: "z" },
      ],
      [
        { name: "etc/b", content: "b" },
        { name: "etc/a", content: "a2" },
        { name: "opt/new/x", content: "x" },
      ],
    );
    expect(t.walk()).toEqual([
      "etc",
      "etc/a",
      "etc/b",
      "etc/c",
      "opt",
      "opt/new",
      "opt/new/x",
      "usr",
      "usr/z",
    ]);
    expect(t.creationOrder()).toEqual([
      "etc",
      "etc/a",
      "etc/c",
      "usr",
      "usr/z",
      "etc/b",
      "opt",
      "opt/new",
      "opt/new/x",
    ]);
  });

  it("keeps extended attributes byte for byte, and symlinks pointing anywhere as entries", async () => {
    const caps = Buffer.from([1, 0, 0, 2, 0x80, 0x20, 0, 0, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    const t = await unpack([
      { name: "usr/bin/ping", content: "p", xattrs: { "security.capability": caps } },
      { name: "etc/mtab", type: "symlink", linkname: "/proc/self/mounts" },
      { name: "etc/far", type: "symlink", linkname: "../../../../outside" },
      { name: "etc/far2", type: "link", linkname: "usr/bin/ping" },
    ]);
    expect(t.file("usr/bin/ping")!.meta.xattrs).toEqual([
      { name: "security.capability", value: caps },
    ]);
    expect(t.paths.get("etc/mtab")).toMatchObject({ target: "/proc/self/mounts" });
    expect(t.paths.get("etc/far")).toMatchObject({ target: "../../../../outside" });
  });

  it("a symlink is replaced by an entry at its own path, not written through", async () => {
    const t = await unpack(
      [{ name: "etc/resolv.conf", type: "symlink", linkname: "/run/resolv.conf" }],
      [{ name: "etc/resolv.conf", content: "nameserver 1.1.1.1\n" }],
    );
    expect(await text(t, "etc/resolv.conf")).toBe("nameserver 1.1.1.1\n");
    expect(t.paths.has("run")).toBe(false);
  });
});
