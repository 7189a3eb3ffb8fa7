// What a layer tar says in bytes and PAX records, carried into the slot's filesystem as it is:
// names are bytes, not text (two names that differ in one byte that is not UTF-8 are two
// files), and an owner Go's archive/tar (buildah, umoci) writes only as a PAX `uid`/`gid`
// record is the file's owner. The tars are written byte by byte here: tar-stream's packer
// would write every name as UTF-8. A host directory (treeFromDirectory) holds its paths as
// text: a name there that is not UTF-8 is refused, naming its bytes.
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { execFileSync } from "node:child_process";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { makeFilesystemImage } from "../../src/release/from-image/fs.js";
import { treeFromDirectory, type Tree } from "../../src/release/from-image/tree.js";
import { unpackLayers } from "../../src/release/from-image/unpack.js";
import { paxRecords } from "../support/oci-layout.js";

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "liken-bytes-"));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

interface RawEntry {
  /** The name's bytes (a latin1 string: one character per byte). */
  name: string;
  type?: "file" | "directory" | "symlink" | "link";
  body?: string;
  linkname?: string;
  /** The header's uid field, as octal text (Go writes "0000000" when the PAX record has it). */
  uidField?: string;
  pax?: Record<string, string>;
}

const TYPEFLAG = { file: "0", directory: "5", symlink: "2", link: "1" } as const;

/** One 512-byte ustar header, every string field written as the bytes given. */
function header(name: string, type: string, size: number, o: Partial<RawEntry>): Buffer {
  const h = Buffer.alloc(512);
  const put = (s: string, at: number): void => void h.write(s, at, "latin1");
  put(name, 0);
  put(type === "5" ? "0000755\0" : "0000644\0", 100);
  put(`${o.uidField ?? "0000000"}\0`, 108);
  put("0000000\0", 116);
  put(`${size.toString(8).padStart(11, "0")}\0`, 124);
  put(`${(1_700_000_000).toString(8).padStart(11, "0")}\0`, 136);
  put(type, 156);
  if (o.linkname !== undefined) put(o.linkname, 157);
  put("ustar\0" + "00", 257);
  h.fill(0x20, 148, 156);
  put(
    `${h
      .reduce((a, b) => a + b, 0)
      .toString(8)
      .padStart(6, "0")}\0 `,
    148,
  );
  return h;
}

const padded = (b: Buffer): Buffer =>
  Buffer.concat([b, Buffer.alloc((512 - (b.length % 512)) % 512)]);

/** A tar of `entries`: a PAX header ('x') before each entry that has records. */
function rawTar(entries: RawEntry[]): Buffer {
  const out: Buffer[] = [];
  for (const e of entries) {
    if (e.pax !== undefined) {
      const records = paxRecords(
        Object.fromEntries(Object.entries(e.pax).map(([k, v]) => [k, Buffer.from(v, "latin1")])),
      );
      out.push(header("PaxHeaders/entry", "x", records.length, {}), padded(records));
    }
    const body = Buffer.from(e.body ?? "");
    out.push(header(e.name, TYPEFLAG[e.type ?? "file"], body.length, e), padded(body));
  }
  out.push(Buffer.alloc(1024));
  return Buffer.concat(out);
}

async function unpack(entries: RawEntry[]): Promise<Tree> {
  const file = path.join(dir, "layer.tar");
  await writeFile(file, rawTar(entries));
  return unpackLayers(
    [{ name: "layer 0", file, mediaType: "application/vnd.oci.image.layer.v1.tar" }],
    { contentDir: path.join(dir, "content"), sourceDateEpoch: 1_750_000_000 },
  );
}

/** An ext4 of the tree, as the release build makes it. */
async function ext4Of(tree: Tree): Promise<string> {
  const img = path.join(dir, "rootfs.img");
  await makeFilesystemImage({
    tree,
    fs: "ext4",
    out: img,
    sizeBytes: 8 * 1024 * 1024,
    sourceDateEpoch: 1_750_000_000,
    uuid: "11111111-2222-4333-8444-555555555555",
  });
  return img;
}

/** debugfs's output of `commands`, a script of bytes (a non-UTF-8 name cannot be an argv). */
async function debugfs(img: string, commands: string): Promise<string> {
  const script = path.join(dir, "read.debugfs");
  await writeFile(script, commands, "latin1");
  return execFileSync("debugfs", ["-f", script, img], {
    stdio: ["ignore", "pipe", "ignore"],
  }).toString("latin1");
}

/** The names in `/dir` of the image, as bytes (latin1 strings), from `ls -p`'s /ino/mode/uid/gid/name/ lines. */
async function namesIn(img: string, d: string): Promise<string[]> {
  const out = await debugfs(img, `ls -p "${d}"\n`);
  return [...out.matchAll(/^\/\d+\/\d+\/\d+\/\d+\/(.*)\/\d*\/$/gm)]
    .map((m) => m[1]!)
    .filter((n) => n !== "." && n !== "..");
}

// "café" in Latin-1 and "cafè" in Latin-1: each is one byte that is not UTF-8 (a decoder makes
// both U+FFFD), beside "café" in UTF-8.
const E_ACUTE = "caf\xe9";
const E_GRAVE = "caf\xe8";
const UTF8 = Buffer.from("café", "utf8").toString("latin1");

const names: RawEntry[] = [
  { name: "etc/", type: "directory" },
  { name: `etc/${E_ACUTE}`, body: "latin1 e-acute\n" },
  { name: `etc/${E_GRAVE}`, body: "latin1 e-grave\n" },
  { name: `etc/${UTF8}`, body: "utf-8\n" },
  // Go's archive/tar puts a name that is not ASCII in a PAX path record, raw.
  { name: "etc/pax-a", body: "pax \\xff\n", pax: { path: "etc/p\xff" } },
  { name: "etc/pax-b", body: "pax \\xfe\n", pax: { path: "etc/p\xfe" } },
  { name: "etc/link", type: "symlink", linkname: E_ACUTE },
  { name: "etc/hard", type: "link", linkname: `etc/${E_GRAVE}` },
];

describe("names are bytes", () => {
  it("two names differing in one byte that is not UTF-8 are two paths of the tree", async () => {
    const t = await unpack(names);
    expect(t.walk()).toEqual(
      [
        "etc",
        `etc/${E_ACUTE}`,
        `etc/${E_GRAVE}`,
        `etc/${UTF8}`,
        "etc/hard",
        "etc/link",
        "etc/p\xfe",
        "etc/p\xff",
      ].sort((a, b) => Buffer.compare(Buffer.from(a, "latin1"), Buffer.from(b, "latin1"))),
    );
    expect(t.paths.get("etc/link")).toMatchObject({ kind: "symlink", target: E_ACUTE });
    expect(t.paths.get("etc/hard")).toEqual(t.paths.get(`etc/${E_GRAVE}`));
  });

  it("...and two files of the slot's ext4, each with its own bytes, written byte-exact", async () => {
    const img = await ext4Of(await unpack(names));
    const got = await namesIn(img, "/etc");
    expect(got.sort()).toEqual([E_ACUTE, E_GRAVE, UTF8, "hard", "link", "p\xfe", "p\xff"].sort());
    const cat = (p: string): Promise<string> => debugfs(img, `cat "${p}"\n`);
    expect(await cat(`/etc/${E_ACUTE}`)).toContain("latin1 e-acute\n");
    expect(await cat(`/etc/${E_GRAVE}`)).toContain("latin1 e-grave\n");
    expect(await cat(`/etc/${UTF8}`)).toContain("utf-8\n");
    expect(await cat("/etc/p\xff")).toContain("pax \\xff\n");
    expect(await cat("/etc/p\xfe")).toContain("pax \\xfe\n");
    expect(await debugfs(img, `stat "/etc/link"\n`)).toContain(`Fast link dest: "${E_ACUTE}"`);
    expect(await debugfs(img, `stat "/etc/hard"\n`)).toMatch(/Links: 2/);
    execFileSync("e2fsck", ["-fn", img], { stdio: "ignore" }); // throws on any error
  });
});

describe("owners from PAX records", () => {
  const owned: RawEntry[] = [
    // Go's archive/tar: the owner does not fit the header's 7 octal digits, so the header
    // field is 0 and the PAX record has it.
    { name: "srv/go", body: "go\n", pax: { uid: "2000000", gid: "2000001" } },
    // A writer that filled the field with its largest value: the record still wins.
    { name: "srv/full", body: "full\n", uidField: "7777777", pax: { uid: "3000000" } },
    { name: "srv/plain", body: "plain\n", uidField: "0001750" },
  ];

  it("are the files' owners", async () => {
    const t = await unpack(owned);
    expect(t.file("srv/go")!.meta).toMatchObject({ uid: 2_000_000, gid: 2_000_001 });
    expect(t.file("srv/full")!.meta).toMatchObject({ uid: 3_000_000, gid: 0 });
    expect(t.file("srv/plain")!.meta).toMatchObject({ uid: 1000, gid: 0 });
    const img = await ext4Of(t);
    expect(await debugfs(img, 'stat "/srv/go"\n')).toMatch(/User: 2000000\s+Group: 2000001/);
    expect(await debugfs(img, 'stat "/srv/full"\n')).toMatch(/User: 3000000\s+Group:\s+0/);
  });

  it("refuses a PAX owner that is not a whole number, naming the entry", async () => {
    await expect(unpack([{ name: "srv/x", body: "x", pax: { uid: "-1" } }])).rejects.toMatchObject({
      code: "LIKEN_IMAGE_LAYER_ENTRY",
      message: expect.stringMatching(/^layer 0 entry "srv\/x": the PAX record uid="-1"/),
    });
  });
});

describe("a host directory's name that is not UTF-8", () => {
  it("is refused naming its bytes, not read as another name", async () => {
    const root = path.join(dir, "root");
    await mkdir(root);
    const name = Buffer.from(`${root}/caf\xe9`, "latin1");
    await writeFile(name, "x");
    expect((await readFile(name)).toString()).toBe("x"); // there, under its bytes
    await expect(treeFromDirectory(root)).rejects.toMatchObject({
      code: "LIKEN_IMAGE_LAYER_ENTRY",
      message: expect.stringContaining(`${root}/caf\\xe9: the name is not UTF-8`),
    });
  });
});
