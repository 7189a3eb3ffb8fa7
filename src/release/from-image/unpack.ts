// Applies an image's layers, lowest first, to a Tree (./tree.ts) the way a container runtime
// does (OCI image spec, "Applying changesets"): entries replace what is there, `.wh.<name>`
// removes a lower layer's path, `.wh..wh..opq` hides everything a lower layer put in its
// directory. Extended attributes (the PAX records SCHILY.xattr.*: security.capability...) are
// kept (./pax.ts). What a slot's root filesystem must never get is refused, naming the layer and
// the entry: a path with `..`, a path that goes through a symlink (it could be written
// through to anywhere), a device node or fifo, a hard link to what is not a file, a whiteout
// of a path no lower layer has. Names are bytes, never decoded (./names.ts): tar headers are
// read as latin1 and PAX records byte for byte, so no two names of a layer become one.
import { createHash } from "node:crypto";
import { createReadStream, createWriteStream } from "node:fs";
import { mkdir, rm } from "node:fs/promises";
import { PassThrough, type Readable, type Transform } from "node:stream";
import { pipeline } from "node:stream/promises";
import zlib from "node:zlib";
import { extract, type Header as Headers } from "tar-stream";
import { imageError } from "./errors.js";
import { MEDIA, type OciImage } from "./oci.js";
import { shown } from "./names.js";
import { installPaxDecoder, paxNumber, xattrsOf } from "./pax.js";
import { Tree, type Meta } from "./tree.js";

export interface LayerSource {
  /** How refusals name the layer, e.g. `layer 2 (sha256:...)`. */
  name: string;
  file: string;
  mediaType: string;
  /** The uncompressed tar's digest (the config's diff_id), checked when given. */
  diffId?: string;
}

export function layersOf(image: OciImage): LayerSource[] {
  return image.layers.map((d, i) => ({
    name: `layer ${i} (${d.digest})`,
    file: image.blobPath(d),
    mediaType: d.mediaType,
    diffId: image.diffIds[i]!,
  }));
}

export interface UnpackOptions {
  /** Where file contents are kept (created if missing). */
  contentDir: string;
  /**
   * Every mtime later than this is set to it (SOURCE_DATE_EPOCH); it is also the time of the
   * directories no entry names (the root, missing parents). Absent: nothing is clamped, and
   * those directories take the newest mtime of the other paths (Tree.newestMtime() is then
   * that time), a time the image itself fixes, never the build's.
   */
  sourceDateEpoch?: number;
}

/** `a/./b/`, `/a/b`, `./a/b` -> `a/b`; "" for the root. Refuses `..`. */
export function entryPath(name: string, where: string): string {
  const parts = name.split("/").filter((s) => s !== "" && s !== ".");
  if (parts.includes("..")) {
    throw imageError(
      "LIKEN_IMAGE_LAYER_ESCAPES",
      `${where}: the path has "..": it would reach outside the image's root; rebuild the layer without it`,
      { entry: shown(name) },
    );
  }
  return parts.join("/");
}

function decompressor(l: LayerSource): Transform | undefined {
  if (l.mediaType === MEDIA.layer) return undefined;
  if (l.mediaType === MEDIA.layerGzip) return zlib.createGunzip();
  const z = (zlib as unknown as { createZstdDecompress?: () => Transform }).createZstdDecompress;
  if (l.mediaType === MEDIA.layerZstd && z !== undefined) return z();
  throw imageError(
    "LIKEN_IMAGE_COMPRESSION",
    `${l.name}: ${l.mediaType} cannot be read by this Node (${process.version} has no zstd): ` +
      `write the image with gzip layers (buildah push --compression-format gzip, skopeo copy --dest-compress-format gzip)`,
    { layer: l.name, mediaType: l.mediaType },
  );
}

class Applier {
  /** Paths this layer wrote, with their parents: an opaque whiteout keeps them. */
  private layer = new Set<string>();
  /** The metadata of directories no entry named: dated by finish() when no epoch is given. */
  private readonly implicit = new Set<Meta>();
  readonly tree: Tree;

  constructor(
    contentDir: string,
    private readonly epoch: number | undefined,
  ) {
    this.tree = new Tree(contentDir, this.implicitMeta());
  }

  private implicitMeta(): Meta {
    const m = { mode: 0o755, uid: 0, gid: 0, mtime: this.epoch ?? 0 };
    this.implicit.add(m);
    return m;
  }

  /** With no epoch: the directories no entry named take the newest mtime of the others. */
  finish(): void {
    if (this.epoch !== undefined) return;
    let newest = 0;
    for (const e of this.tree.paths.values()) {
      const m = e.kind === "file" ? this.tree.files.get(e.ino)!.meta : e.meta;
      if (!this.implicit.has(m)) newest = Math.max(newest, m.mtime);
    }
    for (const m of this.implicit) m.mtime = newest;
  }

  private index = -1;

  startLayer(): void {
    this.layer = new Set();
    this.index++;
  }

  /** Records the layer a path first appears in (a replaced path keeps its own). */
  private born(p: string, existed: boolean): void {
    if (!existed && this.index > 0) this.tree.layerOf.set(p, this.index);
  }

  private mark(p: string): void {
    for (let q = p; ; q = q.slice(0, Math.max(0, q.lastIndexOf("/")))) {
      this.layer.add(q);
      if (q === "" || !q.includes("/")) break;
    }
  }

  /** The entry's metadata: a PAX record wins over the header's field (./pax.ts). */
  meta(h: Headers, where: string): Meta {
    const pax = h.pax as Record<string, string> | undefined;
    const mtime = paxNumber(pax, "mtime", where) ?? Math.floor((h.mtime?.getTime() ?? 0) / 1000);
    const xattrs = xattrsOf(pax);
    return {
      mode: (h.mode ?? 0o644) & 0o7777,
      uid: paxNumber(pax, "uid", where) ?? h.uid ?? 0,
      gid: paxNumber(pax, "gid", where) ?? h.gid ?? 0,
      mtime: Math.min(Math.max(mtime, 0), this.epoch ?? Infinity),
      ...(xattrs.length > 0 ? { xattrs } : {}),
    };
  }

  /** The parents of `p` are directories (made when missing, if `make`); none is a symlink. */
  parents(p: string, where: string, make = true): void {
    const parts = p.split("/");
    for (let j = 1; j < parts.length; j++) {
      const q = parts.slice(0, j).join("/");
      const e = this.tree.paths.get(q);
      if (e === undefined) {
        if (!make) return;
        this.tree.paths.set(q, { kind: "dir", meta: this.implicitMeta() });
        this.born(q, false);
      } else if (e.kind === "symlink") {
        throw imageError(
          "LIKEN_IMAGE_LAYER_ESCAPES",
          `${where}: the path goes through the symlink /${shown(q)} -> ${shown(e.target)}: writing through a ` +
            `symlink can reach outside the image's root; put the file at its real path`,
          { entry: shown(p), symlink: `/${shown(q)}`, target: shown(e.target) },
        );
      } else if (e.kind === "file") {
        throw imageError(
          "LIKEN_IMAGE_LAYER_ENTRY",
          `${where}: /${shown(q)} is a file in a lower layer, not a directory`,
          { entry: shown(p), parent: `/${shown(q)}` },
        );
      }
    }
  }

  whiteout(p: string, where: string): void {
    const slash = p.lastIndexOf("/");
    const dir = slash < 0 ? "" : p.slice(0, slash);
    const name = p.slice(slash + 1);
    if (name === ".wh..wh..opq") {
      const prefix = dir === "" ? "" : `${dir}/`;
      if (this.tree.paths.get(dir)?.kind !== "dir") {
        throw imageError(
          "LIKEN_IMAGE_WHITEOUT_MISSING",
          `${where}: an opaque whiteout of /${shown(dir)}, which no lower layer has as a directory: the layer was made against another base; rebuild it from this image's base`,
          { entry: shown(p), path: `/${shown(dir)}` },
        );
      }
      for (const k of [...this.tree.paths.keys()]) {
        if (k !== dir && k.startsWith(prefix) && !this.layer.has(k)) this.tree.paths.delete(k);
      }
      return;
    }
    if (name.startsWith(".wh..wh.")) {
      throw imageError(
        "LIKEN_IMAGE_LAYER_ENTRY",
        `${where}: "${shown(name)}" is an AUFS metadata entry, not an OCI whiteout; export the image with buildah or skopeo`,
        { entry: shown(p) },
      );
    }
    const target = (dir === "" ? "" : `${dir}/`) + name.slice(".wh.".length);
    if (!this.tree.paths.has(target)) {
      throw imageError(
        "LIKEN_IMAGE_WHITEOUT_MISSING",
        `${where}: a whiteout of /${shown(target)}, which no lower layer has: the layer was made against another base; rebuild it from this image's base`,
        { entry: shown(p), path: `/${shown(target)}` },
      );
    }
    this.tree.remove(target);
  }

  async entry(h: Headers, body: Readable, where: string): Promise<void> {
    const p = entryPath(h.name, where);
    const base = p.slice(p.lastIndexOf("/") + 1);
    if (p !== "" && base.startsWith(".wh.")) {
      this.parents(p, where, false);
      this.whiteout(p, where);
      body.resume();
      return;
    }
    if (p === "") this.root(h, where);
    else {
      this.parents(p, where);
      const existed = this.tree.paths.has(p);
      const first = this.tree.layerOf.get(p);
      await this.put(p, h, body, where);
      // put() may have removed the old entry (and its place): keep the place it had.
      if (existed && first !== undefined) this.tree.layerOf.set(p, first);
      this.born(p, existed);
      this.mark(p);
    }
    body.resume();
  }

  private root(h: Headers, where: string): void {
    if (h.type !== "directory") {
      throw imageError("LIKEN_IMAGE_LAYER_ENTRY", `${where}: the root is not a directory`, {
        entry: shown(h.name),
      });
    }
    this.tree.paths.set("", { kind: "dir", meta: this.meta(h, where) });
  }

  private async put(p: string, h: Headers, body: Readable, where: string): Promise<void> {
    switch (h.type) {
      case "directory": {
        // A directory over a directory keeps what is under it, with the new metadata.
        if (this.tree.paths.get(p)?.kind !== "dir") this.tree.remove(p);
        this.tree.paths.set(p, { kind: "dir", meta: this.meta(h, where) });
        return;
      }
      case "file":
      case "contiguous-file": {
        this.tree.remove(p);
        const { ino, content } = this.tree.newContent();
        await pipeline(body, createWriteStream(content));
        this.tree.addFile(p, ino, content, this.meta(h, where), h.size ?? 0);
        return;
      }
      case "symlink":
        this.tree.remove(p);
        this.tree.paths.set(p, {
          kind: "symlink",
          target: h.linkname ?? "",
          meta: this.meta(h, where),
        });
        return;
      case "link":
        return this.hardLink(p, h, where);
      case "character-device":
      case "block-device":
      case "fifo":
        throw imageError(
          "LIKEN_IMAGE_LAYER_DEVICE",
          `${where}: a ${h.type} (/${shown(p)}): a slot's root filesystem holds no device nodes or fifos (udev and systemd make them at boot); remove it from the image`,
          { entry: shown(p), type: h.type },
        );
      default:
        throw imageError(
          "LIKEN_IMAGE_LAYER_ENTRY",
          `${where}: entry type "${h.type}" is not a file, directory, symlink or hard link`,
          { entry: shown(p), type: h.type },
        );
    }
  }

  private hardLink(p: string, h: Headers, where: string): void {
    const to = `${where} (hard link to "${shown(h.linkname ?? "")}")`;
    const target = entryPath(h.linkname ?? "", to);
    this.parents(target, to, false);
    const t = this.tree.paths.get(target);
    if (t?.kind !== "file") {
      throw imageError(
        "LIKEN_IMAGE_LAYER_ENTRY",
        `${where}: a hard link to /${shown(target)}, which is ${t === undefined ? "not in the image" : `a ${t.kind}`}: a hard link must name a regular file before it`,
        { entry: shown(p), target: `/${shown(target)}` },
      );
    }
    this.tree.remove(p);
    this.tree.paths.set(p, { kind: "file", ino: t.ino });
  }
}

/** Applies `layers` in order into a new Tree whose file contents go to `o.contentDir`. */
export async function unpackLayers(layers: LayerSource[], o: UnpackOptions): Promise<Tree> {
  installPaxDecoder();
  await mkdir(o.contentDir, { recursive: true });
  const apply = new Applier(o.contentDir, o.sourceDateEpoch);
  const tree = apply.tree;
  for (const l of layers) {
    apply.startLayer();
    const hash = createHash("sha256");
    const tap = new PassThrough();
    tap.on("data", (b: Buffer) => hash.update(b));
    // latin1: a name's bytes as they are (./names.ts); tar-stream's default, UTF-8, would
    // make every byte that is not UTF-8 U+FFFD. Its extract reads the option (extract.js);
    // its types do not declare it.
    const ex = extract({ filenameEncoding: "latin1" } as Parameters<typeof extract>[0]);
    const stages: (Readable | Transform)[] = [createReadStream(l.file)];
    const z = decompressor(l);
    if (z !== undefined) stages.push(z);
    const done = pipeline([...stages, tap, ex] as unknown as [Readable, ...Transform[]]);
    done.catch(() => undefined); // awaited below; a refusal in the loop destroys it
    try {
      for await (const entry of ex) {
        await apply.entry(
          entry.header,
          entry as unknown as Readable,
          `${l.name} entry "${shown(entry.header.name)}"`,
        );
      }
      await done;
    } catch (e) {
      ex.destroy();
      if (e instanceof Error && "code" in e && String(e.code).startsWith("LIKEN_")) throw e;
      throw imageError(
        "LIKEN_IMAGE_LAYER_ENTRY",
        `${l.name}: not a readable ${l.mediaType}: ${(e as Error).message}`,
        { layer: l.name },
        e,
      );
    }
    const got = `sha256:${hash.digest("hex")}`;
    if (l.diffId !== undefined && got !== l.diffId) {
      throw imageError(
        "LIKEN_IMAGE_DIGEST",
        `${l.name}: its uncompressed bytes hash to ${got}, the image config's diff_id says ${l.diffId}: the layer is damaged; copy the image again`,
        { layer: l.name, got, diffId: l.diffId },
      );
    }
  }
  apply.finish();
  // Contents no path names any more (replaced or whited out) are dropped.
  const used = new Set<number>();
  for (const e of tree.paths.values()) if (e.kind === "file") used.add(e.ino);
  for (const [ino, f] of tree.files) {
    if (!used.has(ino)) {
      tree.files.delete(ino);
      await rm(f.content, { force: true });
    }
  }
  return tree;
}
