// A root filesystem tree as liken holds it between unpacking layers and making a filesystem
// image: every path's kind and metadata in memory, each regular file's bytes in a content
// directory (one host file per inode, so hard links share it). Owners, modes, set-uid bits
// and times never touch the host, so an unprivileged user builds exactly what root would, and
// no path of the image is ever a host symlink that a later entry could be written through.
import { lstat, readdir, readlink } from "node:fs/promises";
import path from "node:path";
import { imageError } from "./errors.js";
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
  | { kind: "symlink"; target: string; meta: Meta }
  | { kind: "file"; ino: number };

export interface FileNode {
  meta: Meta;
  size: number;
  /** The host file with the bytes. */
  content: string;
}

export class Tree {
  /** "" is the root; other keys are relative, "/"-separated, without "." or "..". */
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
   * numbers, directory blocks and data placement for every lower path). Parents come first:
   * a path never appears before its parent's layer.
   */
  creationOrder(): string[] {
    const order = this.walk();
    const rank = (p: string): number => this.layerOf.get(p) ?? 0;
    return order
      .map((p, i) => [p, i] as const)
      .sort((a, b) => rank(a[0]) - rank(b[0]) || a[1] - b[1])
      .map(([p]) => p);
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

export function byteOrder(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a), Buffer.from(b));
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
    for (const name of (await readdir(path.join(dir, rel))).sort(byteOrder)) {
      const p = rel === "" ? name : `${rel}/${name}`;
      const host = path.join(dir, p);
      const s = await lstat(host);
      if (s.isDirectory()) {
        tree.paths.set(p, { kind: "dir", meta: meta(s) });
        await visit(p);
      } else if (s.isSymbolicLink()) {
        tree.paths.set(p, { kind: "symlink", target: await readlink(host), meta: meta(s) });
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
