// A slot's root filesystem image made from a Tree (./tree.ts), the same bytes on any machine
// and any day for the same tree and options: ext4 made empty by mke2fs (fixed UUID, hash seed
// and time) and filled by debugfs from a script that creates every path in byte order and
// sets every owner, mode and time from the tree (so neither the host's directory order, nor
// its clock, nor the builder's uid reach the image); or EROFS by mkfs.erofs. The choice and
// its figures: docs/adr/slot-filesystem-from-image.md. Names are written as their bytes
// (./names.ts): the script is latin1, each character one byte.
import { spawn } from "node:child_process";
import {
  chmod,
  lchown,
  link,
  lutimes,
  mkdir,
  rm,
  symlink,
  truncate,
  writeFile,
  copyFile,
} from "node:fs/promises";
import path from "node:path";
import { imageError } from "./errors.js";
import { nameBytes, shown, textAsName } from "./names.js";
import type { Meta, Tree } from "./tree.js";

export type SlotFs = "ext4" | "erofs";

export interface FilesystemImageOptions {
  tree: Tree;
  fs: SlotFs;
  /** The image file to write (replaced). */
  out: string;
  /** ext4: the image's size (the slot's); erofs: the largest size allowed. A multiple of 4096. */
  sizeBytes: number;
  /** Every time in the filesystem (mkfs time, inode times above it are clamped already). */
  sourceDateEpoch: number;
  /** The filesystem UUID (and ext4's hash seed). */
  uuid: string;
  label?: string;
  /** A scratch directory for the script (default: beside `out`). */
  workDir?: string;
}

const BLOCK = 4096;

interface Run {
  code: number;
  stderr: string;
}

function run(cmd: string, args: string[], env: Record<string, string>): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, {
      stdio: ["ignore", "ignore", "pipe"],
      env: {
        PATH: process.env.PATH ?? "/usr/sbin:/usr/bin:/sbin:/bin",
        LC_ALL: "C",
        TZ: "UTC",
        ...env,
      },
    });
    let stderr = "";
    child.stderr.on("data", (b: Buffer) => {
      if (stderr.length < 1 << 20) stderr += b.toString();
    });
    child.on("error", (e) =>
      reject(
        imageError(
          "LIKEN_IMAGE_MKFS",
          `${cmd}: ${e.message}: install it (sh testbed/setup-debian.sh)`,
          { cmd },
          e,
        ),
      ),
    );
    child.on("close", (code) => resolve({ code: code ?? 1, stderr }));
  });
}

/** A debugfs argument (a byte string): double-quoted, a quote doubled (the ss library's quoting). */
function q(s: string): string {
  if (/[\n\r\0]/.test(s)) {
    throw imageError(
      "LIKEN_IMAGE_LAYER_ENTRY",
      `"${shown(s)}": a name with a line break cannot be put in the slot's filesystem`,
      { path: shown(s) },
    );
  }
  return `"${s.replace(/"/g, '""')}"`;
}

const S_IFDIR = 0o040000;
const S_IFREG = 0o100000;
const S_IFLNK = 0o120000;

/**
 * mke2fs makes /lost+found, and e2fsck makes it again when it is missing or not a directory:
 * an image's own (a root filesystem tarred off a mounted ext4 has one) is that directory, with
 * the image's owner, mode and times, never made a second time.
 */
const LOST_FOUND = "lost+found";

/** Refuses a /lost+found that is not a directory: e2fsck would replace it with one. */
function checkLostFound(tree: Tree): void {
  const e = tree.paths.get(LOST_FOUND);
  if (e === undefined || e.kind === "dir") return;
  throw imageError(
    "LIKEN_IMAGE_LAYER_ENTRY",
    `/lost+found is a ${e.kind} in the image: an ext4 slot has its lost+found directory there (mke2fs makes it, e2fsck makes it again in place of anything else), so the ${e.kind} would be lost; remove it from the image or make it a directory`,
    { path: "/lost+found", kind: e.kind },
  );
}

/** The blocks and inodes the tree needs in ext4 (4 KiB blocks), with room for extents and dirs. */
export function ext4Needs(tree: Tree): { blocks: number; inodes: number } {
  let blocks = 0;
  let inodes = 0;
  const dirBytes = new Map<string, number>();
  for (const [p, e] of tree.paths) {
    if (p !== "") {
      const parent = p.includes("/") ? p.slice(0, p.lastIndexOf("/")) : "";
      const name = nameBytes(p.slice(p.lastIndexOf("/") + 1)).length;
      dirBytes.set(parent, (dirBytes.get(parent) ?? 24) + 8 + Math.ceil(name / 4) * 4);
    }
    if (e.kind === "symlink") {
      inodes++;
      if (nameBytes(e.target).length >= 60) blocks++;
    } else if (e.kind === "dir") inodes++;
  }
  for (const n of dirBytes.values()) blocks += Math.ceil(n / BLOCK);
  for (const f of tree.files.values()) {
    inodes++;
    const b = Math.ceil(f.size / BLOCK);
    // An extent covers at most 32768 blocks; past four, an index block per 340.
    const extents = Math.ceil(b / 32768);
    blocks += b + (extents > 4 ? Math.ceil(extents / 340) : 0);
  }
  return { blocks, inodes };
}

function tooLarge(o: FilesystemImageOptions, need: string): never {
  const mib = (n: number): string => `${(n / 2 ** 20).toFixed(1)} MiB`;
  throw imageError(
    "LIKEN_IMAGE_TOO_LARGE",
    `the image does not fit an ${o.fs} filesystem of ${mib(o.sizeBytes)} (--slot-size, less the kernel and initrd placed after it): ${need}; ` +
      `give a larger --slot-size (the machines' slot partitions must be at least as large) or make the image smaller`,
    { sizeBytes: o.sizeBytes, fs: o.fs },
  );
}

async function makeExt4(o: FilesystemImageOptions): Promise<void> {
  // e2fsprogs reads a fake time of 0 as none and takes the clock (mke2fs, debugfs, e2fsck):
  // at time 0 the tools are given 1, so the superblock's times are the same on every build.
  // Every inode of the tree has its times from the script (sif), 0 included.
  const time = String(Math.max(1, o.sourceDateEpoch));
  const env = { E2FSPROGS_FAKE_TIME: time, SOURCE_DATE_EPOCH: time };
  // The script first: a tree that cannot be written is refused before anything is made.
  const file = path.join(o.workDir ?? path.dirname(o.out), `.${path.basename(o.out)}.debugfs`);
  const xattrs = { dir: `${file}.xattrs`, values: [] as Buffer[] };
  const script = ext4Script(o.tree, xattrs);
  await rm(o.out, { force: true });
  const mk = await run(
    "mke2fs",
    [
      "-q",
      "-F",
      "-t",
      "ext4",
      "-b",
      String(BLOCK),
      // mke2fs.conf would make a small filesystem "small" (1 KiB blocks): the usual ratios.
      "-T",
      "default",
      "-m",
      "0",
      "-L",
      o.label ?? "liken-root",
      "-U",
      o.uuid,
      "-E",
      `hash_seed=${o.uuid},root_owner=0:0,lazy_itable_init=0,nodiscard`,
      o.out,
      `${o.sizeBytes / 1024}k`,
    ],
    env,
  );
  if (mk.code !== 0) {
    throw imageError("LIKEN_IMAGE_MKFS", `mke2fs ${o.out}: ${mk.stderr.trim()}`, { out: o.out });
  }
  const free = await ext4Free(o.out);
  const need = ext4Needs(o.tree);
  if (need.blocks > free.blocks || need.inodes > free.inodes) {
    await rm(o.out, { force: true });
    tooLarge(
      o,
      `its files need ${need.blocks} blocks of 4 KiB and ${need.inodes} inodes, an empty ext4 of that size has ${free.blocks} and ${free.inodes}`,
    );
  }
  await writeFile(file, script, "latin1");
  try {
    if (xattrs.values.length > 0) await mkdir(xattrs.dir, { recursive: true });
    for (const [i, v] of xattrs.values.entries())
      await writeFile(path.join(xattrs.dir, String(i)), v);
    const r = await run("debugfs", ["-w", "-f", file, o.out], env);
    const errors = r.stderr.split("\n").filter((l) => l.trim() !== "" && !/^debugfs \d/.test(l));
    if (r.code !== 0 || errors.length > 0) {
      await rm(o.out, { force: true });
      if (errors.some((l) => /allocate|No free space|Could not expand/i.test(l))) {
        tooLarge(o, errors[0]!);
      }
      throw imageError(
        "LIKEN_IMAGE_MKFS",
        `debugfs filling ${o.out}: ${errors.slice(0, 5).join("; ")}`,
        {
          out: o.out,
        },
      );
    }
  } finally {
    await rm(file, { force: true });
    await rm(xattrs.dir, { recursive: true, force: true });
  }
  // debugfs writes the superblock's write time from the clock: set it, and check the result.
  const fix = await run("e2fsck", ["-fy", o.out], {
    ...env,
    E2FSCK_TIME: time,
  });
  if (fix.code > 1) {
    throw imageError(
      "LIKEN_IMAGE_MKFS",
      `e2fsck ${o.out} (exit ${fix.code}): ${fix.stderr.trim()}`,
      { out: o.out },
    );
  }
}

async function ext4Free(img: string): Promise<{ blocks: number; inodes: number }> {
  const out = await new Promise<string>((resolve, reject) => {
    const c = spawn("dumpe2fs", ["-h", img], { stdio: ["ignore", "pipe", "ignore"] });
    let s = "";
    c.stdout.on("data", (b: Buffer) => (s += b.toString()));
    c.on("error", reject);
    c.on("close", () => resolve(s));
  });
  const num = (k: string): number =>
    Number(new RegExp(`^${k}:\\s+(\\d+)`, "m").exec(out)?.[1] ?? 0);
  return { blocks: num("Free blocks"), inodes: num("Free inodes") };
}

/**
 * The debugfs script that fills an empty ext4 (mke2fs's: its /lost+found is there already)
 * with the tree, in byte order. Each extended attribute is set by `ea_set -f <xattrs.dir>/<n>`
 * (a binary value cannot be an argument); its value is pushed onto `xattrs.values` at index n,
 * for the caller to write there. The script is a byte string: write it as latin1.
 */
export function ext4Script(
  tree: Tree,
  xattrs: { dir: string; values: Buffer[] } = { dir: "", values: [] },
): string {
  checkLostFound(tree);
  const lines: string[] = [];
  const firstPath = new Map<number, string>();
  const links = new Map<number, number>();
  const sif = (p: string, type: number, m: Meta): void => {
    const a = q(`/${p}`);
    lines.push(
      `sif ${a} mode 0${(type | m.mode).toString(8)}`,
      `sif ${a} uid ${m.uid}`,
      `sif ${a} gid ${m.gid}`,
    );
    for (const t of ["atime", "mtime", "ctime", "crtime"]) lines.push(`sif ${a} ${t} @${m.mtime}`);
    for (const x of m.xattrs ?? []) {
      const file = path.join(xattrs.dir, String(xattrs.values.push(x.value) - 1));
      lines.push(`ea_set -f ${q(textAsName(file))} ${a} ${q(x.name)}`);
    }
  };
  let cwd = "";
  const order = tree.creationOrder();
  for (const p of order) {
    const slash = p.lastIndexOf("/");
    const dir = slash < 0 ? "" : p.slice(0, slash);
    const name = p.slice(slash + 1);
    if (dir !== cwd) {
      lines.push(`cd ${q(`/${dir}`)}`);
      cwd = dir;
    }
    const e = tree.paths.get(p)!;
    if (e.kind === "dir") {
      if (p !== LOST_FOUND) lines.push(`mkdir ${q(name)}`);
    } else if (e.kind === "symlink") lines.push(`symlink ${q(name)} ${q(e.target)}`);
    else {
      const first = firstPath.get(e.ino);
      if (first === undefined) {
        firstPath.set(e.ino, p);
        links.set(e.ino, 1);
        lines.push(`write ${q(textAsName(tree.files.get(e.ino)!.content))} ${q(name)}`);
      } else {
        links.set(e.ino, links.get(e.ino)! + 1);
        lines.push(`ln ${q(`/${first}`)} ${q(name)}`);
      }
    }
  }
  lines.push("cd /");
  const root = tree.paths.get("")!;
  if (root.kind === "dir") sif("", S_IFDIR, root.meta);
  for (const p of order) {
    const e = tree.paths.get(p)!;
    if (e.kind === "dir") sif(p, S_IFDIR, e.meta);
    else if (e.kind === "symlink") sif(p, S_IFLNK, e.meta);
    else if (firstPath.get(e.ino) === p) {
      sif(p, S_IFREG, tree.files.get(e.ino)!.meta);
      const n = links.get(e.ino)!;
      if (n > 1) lines.push(`sif ${q(`/${p}`)} links_count ${n}`);
    }
  }
  return `${lines.join("\n")}\n`;
}

/** The host path of the tree's `p` under `dir`, as bytes: `p`'s name may not be UTF-8. */
const hostPath = (dir: string, p: string): Buffer =>
  Buffer.concat([Buffer.from(dir), nameBytes(p === "" ? "" : `/${p}`)]);

/** The tree as a host directory with its owners, modes and times (root only: chown). */
async function materialize(tree: Tree, dir: string): Promise<void> {
  const first = new Map<number, Buffer>();
  const order = tree.walk();
  await mkdir(dir, { recursive: true });
  for (const p of order) {
    const e = tree.paths.get(p)!;
    const host = hostPath(dir, p);
    if (e.kind === "dir") await mkdir(host);
    else if (e.kind === "symlink") await symlink(nameBytes(e.target), host);
    else {
      const f = first.get(e.ino);
      if (f === undefined) {
        first.set(e.ino, host);
        await copyFile(tree.files.get(e.ino)!.content, host);
      } else await link(f, host);
    }
  }
  for (const p of ["", ...order].reverse()) {
    const e = tree.paths.get(p)!;
    const host = hostPath(dir, p);
    const m = e.kind === "file" ? tree.files.get(e.ino)!.meta : e.meta;
    await lchown(host, m.uid, m.gid);
    if (e.kind !== "symlink") await chmod(host, m.mode);
    await lutimes(host, m.mtime, m.mtime);
  }
}

async function makeErofs(o: FilesystemImageOptions): Promise<void> {
  if (process.getuid?.() !== 0) {
    throw imageError(
      "LIKEN_IMAGE_MKFS",
      "EROFS images are made from a directory with the image's owners, which needs root here; use --fs ext4 (made without root)",
      {},
    );
  }
  for (const [p, e] of o.tree.paths) {
    const m = e.kind === "file" ? o.tree.files.get(e.ino)!.meta : e.meta;
    if ((m.xattrs?.length ?? 0) > 0)
      throw imageError(
        "LIKEN_IMAGE_MKFS",
        `/${shown(p)} has extended attributes (${m.xattrs!.map((x) => shown(x.name)).join(", ")}), which liken's EROFS build does not write yet: use --fs ext4, which keeps them`,
        { path: `/${shown(p)}` },
      );
  }
  const dir = `${o.out}.tree`;
  await rm(dir, { recursive: true, force: true });
  try {
    await materialize(o.tree, dir);
    await rm(o.out, { force: true });
    const r = await run(
      "mkfs.erofs",
      // erofs-utils 1.5 (Debian 12) has no label option; files keep their own (clamped) mtimes.
      ["-T", String(o.sourceDateEpoch), "--preserve-mtime", "-U", o.uuid, "-x", "-1", o.out, dir],
      { SOURCE_DATE_EPOCH: String(o.sourceDateEpoch) },
    );
    if (r.code !== 0)
      throw imageError("LIKEN_IMAGE_MKFS", `mkfs.erofs ${o.out}: ${r.stderr.trim()}`, {
        out: o.out,
      });
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
  const { size } = await import("node:fs/promises").then((f) => f.stat(o.out));
  if (size > o.sizeBytes) {
    await rm(o.out, { force: true });
    tooLarge(o, `the EROFS image has ${size} bytes`);
  }
  // The slot's image is a whole number of 4 KiB blocks (artifacts are placed 4 KiB-aligned).
  await truncate(o.out, Math.ceil(size / BLOCK) * BLOCK);
}

/**
 * Makes the slot's root filesystem image `o.out` from `o.tree`. Refuses a tree that does not
 * fit `o.sizeBytes` (LIKEN_IMAGE_TOO_LARGE) and leaves no image behind then.
 */
export async function makeFilesystemImage(o: FilesystemImageOptions): Promise<void> {
  if (!Number.isInteger(o.sizeBytes) || o.sizeBytes <= 0 || o.sizeBytes % BLOCK !== 0) {
    throw imageError(
      "LIKEN_IMAGE_TOO_LARGE",
      `slot size ${o.sizeBytes}: give a positive multiple of 4096 bytes (--slot-size 2G)`,
      { sizeBytes: o.sizeBytes },
    );
  }
  if (!/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/.test(o.uuid)) {
    throw imageError("LIKEN_IMAGE_MKFS", `uuid "${o.uuid}" is not a lower-case UUID`, {
      uuid: o.uuid,
    });
  }
  if (o.fs === "ext4") await makeExt4(o);
  else await makeErofs(o);
}
