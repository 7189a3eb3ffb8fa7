// A root filesystem tree as liken holds it between unpacking layers and making a filesystem
// image: every path's kind and metadata in memory, each regular file's bytes in a content
// directory (one host file per inode, so hard links share it). Owners, modes, set-uid bits
// and times never touch the host, so an unprivileged user builds exactly what root would, and
// no path of the image is ever a host symlink that a later entry could be written through.
import { lstat, readdir, readlink } from "node:fs/promises";
import path from "node:path";
import { imageError } from "./errors.js";
import { nameBytes, shown, textAsName, utf8Text } from "./names.js";
import type { Xattr } from "./pax.js";

export interface Meta {
  /** Permission bits with set-uid, set-gid and sticky (07777). */
  mode: number;
  uid: number;
  gid: number;
  /** Seconds since the epoch (clamped to SOURCE_DATE_EPOCH by the unpacker). */
  mtime: number;
  /** Extended attributes (security.capability...), sorted by name; absent when none. */
  xattrs?: Xattr[];
}

export type Entry =
  | { kind: "dir"; meta: Meta }
  /** `target` is bytes, as names are (./names.ts). */
  | { kind: "symlink"; target: string; meta: Meta }
  | { kind: "file"; ino: number };

export interface FileNode {
  meta: Meta;
  size: number;
  /** The host file with the bytes. */
  content: string;
}

export class Tree {
  /**
   * "" is the root; other keys are relative, "/"-separated, without "." or "..", and are byte
   * strings (one character per byte, ./names.ts): a name is its bytes, never decoded text.
   */
  readonly paths = new Map<string, Entry>();
  readonly files = new Map<number, FileNode>();
  /**
   * The layer each path first appeared in (kept when a later layer replaces its content; a
   * path absent here is of layer 0). Images are made lowest layer first, so an image that only
   * adds a layer keeps every lower path's place (see creationOrder).
   */
  readonly layerOf = new Map<string, number>();
  private nextIno = 1;

  constructor(
    /** Where regular files' bytes are kept (one file per inode). */
    readonly contentDir: string,
    rootMeta: Meta = { mode: 0o755, uid: 0, gid: 0, mtime: 0 },
  ) {
    this.paths.set("", { kind: "dir", meta: rootMeta });
  }

  /** A new inode's content file (the caller writes it, then calls addFile). */
  newContent(): { ino: number; content: string } {
    const ino = this.nextIno++;
    return { ino, content: path.join(this.contentDir, String(ino)) };
  }

  addFile(p: string, ino: number, content: string, meta: Meta, size: number): void {
    this.files.set(ino, { meta, size, content });
    this.paths.set(p, { kind: "file", ino });
  }

  /** The regular file at `p` (following no symlink), or undefined. */
  file(p: string): FileNode | undefined {
    const e = this.paths.get(p);
    return e?.kind === "file" ? this.files.get(e.ino) : undefined;
  }

  /** Every path, parents before children, siblings in byte order: the order images are made in. */
  walk(): string[] {
    const kids = new Map<string, string[]>();
    for (const p of this.paths.keys()) {
      if (p === "") continue;
      const i = p.lastIndexOf("/");
      const parent = i < 0 ? "" : p.slice(0, i);
      const list = kids.get(parent) ?? [];
      list.push(p.slice(i + 1));
      kids.set(parent, list);
    }
    const out: string[] = [];
    const visit = (dir: string): void => {
      for (const name of (kids.get(dir) ?? []).sort(byteOrder)) {
        const p = dir === "" ? name : `${dir}/${name}`;
        out.push(p);
        if (this.paths.get(p)?.kind === "dir") visit(p);
      }
    };
    visit("");
    return out;
  }

  /**
   * walk()'s paths, the lowest layer's first: a path keeps the place its first layer gave it,
   * so a layer added on top of the same base appends to what the base made (the same inode
   * numbers, directory blocks and data placement for every lower path). Parents come first,
   * whatever layer (or none: the GRUB links, ./boot.ts) each path is recorded with: a path is
   * ranked no lower than its parent, so a /boot that a later layer brings is made before the
   * links put in it.
   */
  creationOrder(): string[] {
    const order = this.walk();
    const rank = new Map<string, number>([["", 0]]);
    for (const p of order) {
      const parent = p.includes("/") ? p.slice(0, p.lastIndexOf("/")) : "";
      rank.set(p, Math.max(this.layerOf.get(p) ?? 0, rank.get(parent)!));
    }
    return order
      .map((p, i) => [p, i] as const)
      .sort((a, b) => rank.get(a[0])! - rank.get(b[0])! || a[1] - b[1])
      .map(([p]) => p);
  }

  /** The newest mtime of any path. */
  newestMtime(): number {
    let n = 0;
    for (const e of this.paths.values()) {
      n = Math.max(n, e.kind === "file" ? this.files.get(e.ino)!.meta.mtime : e.meta.mtime);
    }
    return n;
  }

  /** Removes `p` and everything under it. */
  remove(p: string): void {
    const prefix = `${p}/`;
    for (const k of [...this.paths.keys()]) {
      if (k === p || (p === "" ? k !== "" : k.startsWith(prefix))) {
        this.paths.delete(k);
        this.layerOf.delete(k);
      }
    }
  }

  /** Bytes of the files' contents, each inode once. */
  contentBytes(): number {
    let n = 0;
    for (const f of this.files.values()) n += f.size;
    return n;
  }
}

/** The order of two names' bytes. */
export function byteOrder(a: string, b: string): number {
  return Buffer.compare(nameBytes(a), nameBytes(b));
}

/**
 * A host directory's entry name as text: the host's paths are text here (FileNode.content is
 * one), so a name that is not UTF-8 cannot be carried and is refused, naming its bytes, rather
 * than read as another name.
 */
function hostName(dir: string, name: Buffer): string {
  const text = utf8Text(name);
  if (text === undefined) {
    const where = path.join(dir, shown(name));
    throw imageError(
      "LIKEN_IMAGE_LAYER_ENTRY",
      `${where}: the name is not UTF-8, which a root filesystem read from a directory cannot carry: rename it (convmv -f latin1 -t utf8), or import the directory as an image layer, whose names are kept as bytes`,
      { path: where },
    );
  }
  return text;
}

/**
 * A Tree of a host directory as it is (owners, modes and times from lstat; hard links kept):
 * for a root filesystem made on disk rather than unpacked from an image (the machine image's).
 */
export async function treeFromDirectory(
  dir: string,
  o: {
    /** Device nodes, fifos and sockets: refused (default), or left out (udev makes /dev). */
    special?: "refuse" | "skip";
  } = {},
): Promise<Tree> {
  const st = await lstat(dir);
  const meta = (s: typeof st): Meta => ({
    mode: s.mode & 0o7777,
    uid: s.uid,
    gid: s.gid,
    mtime: Math.floor(s.mtimeMs / 1000),
  });
  const tree = new Tree(dir, meta(st));
  const inodes = new Map<string, number>();
  const visit = async (rel: string): Promise<void> => {
    const names = await readdir(path.join(dir, rel), { encoding: "buffer" });
    for (const name of names.sort(Buffer.compare)) {
      const text = hostName(path.join(dir, rel), name);
      const relText = rel === "" ? text : `${rel}/${text}`;
      const p = textAsName(relText);
      const host = path.join(dir, relText);
      const s = await lstat(host);
      if (s.isDirectory()) {
        tree.paths.set(p, { kind: "dir", meta: meta(s) });
        await visit(relText);
      } else if (s.isSymbolicLink()) {
        const target = (await readlink(host, { encoding: "buffer" })).toString("latin1");
        tree.paths.set(p, { kind: "symlink", target, meta: meta(s) });
      } else if (s.isFile()) {
        const key = `${s.dev}:${s.ino}`;
        const known = inodes.get(key);
        if (known !== undefined) {
          tree.paths.set(p, { kind: "file", ino: known });
        } else {
          const { ino } = tree.newContent();
          inodes.set(key, ino);
          tree.addFile(p, ino, host, meta(s), s.size);
        }
      } else if (o.special !== "skip") {
        throw imageError(
          "LIKEN_IMAGE_LAYER_DEVICE",
          `${host}: not a file, directory or symlink: a slot's root filesystem holds no device nodes, fifos or sockets (udev and systemd make them at boot)`,
          { path: host },
        );
      }
    }
  };
  await visit("");
  return tree;
}
