// Small OCI image layouts written by tests: tar layers from a list of entries (tar-stream),
// blobs named by their digests, index.json and oci-layout, as buildah and skopeo write them.
import { createHash } from "node:crypto";
import { mkdir, readdir, readFile, stat, writeFile } from "node:fs/promises";
import path from "node:path";
import { gzipSync } from "node:zlib";
import { pack, type Header } from "tar-stream";

export interface TarEntry {
  name: string;
  type?: Header["type"];
  content?: string | Buffer;
  linkname?: string;
  mode?: number;
  uid?: number;
  gid?: number;
  /** Seconds. */
  mtime?: number;
  /** Extended attributes, as GNU tar and Go's archive/tar write them: SCHILY.xattr.<name>=<bytes>. */
  xattrs?: Record<string, Buffer>;
}

/** PAX records `<len> <key>=<value>\n` with raw byte values (tar-stream would write UTF-8). */
export function paxRecords(records: Record<string, Buffer>): Buffer {
  const out: Buffer[] = [];
  for (const [k, v] of Object.entries(records)) {
    const body = Buffer.concat([Buffer.from(` ${k}=`), v, Buffer.from("\n")]);
    let len = body.length + 1;
    while (String(len).length + body.length !== len) len = String(len).length + body.length;
    out.push(Buffer.concat([Buffer.from(String(len)), body]));
  }
  return Buffer.concat(out);
}

export function tarOf(entries: TarEntry[]): Promise<Buffer> {
  const p = pack();
  const chunks: Buffer[] = [];
  p.on("data", (b: unknown) => void chunks.push(b as Buffer));
  for (const e of entries) {
    const body = e.content === undefined ? undefined : Buffer.from(e.content);
    const type = e.type ?? "file";
    const header = headerOf(e, type, body);
    if (e.xattrs !== undefined) paxEntry(p, e.name, e.xattrs);
    if (type === "file") p.entry(header, body ?? Buffer.alloc(0));
    else p.entry(header, "");
  }
  p.finalize();
  return new Promise<Buffer>((resolve, reject) => {
    p.on("end", () => resolve(retypePax(Buffer.concat(chunks))));
    p.on("error", reject);
  });
}

function headerOf(
  e: TarEntry,
  type: NonNullable<Header["type"]>,
  body: Buffer | undefined,
): Partial<Header> & { name: string } {
  return {
    name: e.name,
    type,
    mode: e.mode ?? (type === "directory" ? 0o755 : 0o644),
    uid: e.uid ?? 0,
    gid: e.gid ?? 0,
    mtime: new Date((e.mtime ?? 1_700_000_000) * 1000),
    ...(e.linkname === undefined ? {} : { linkname: e.linkname }),
    ...(type === "file" ? { size: body?.length ?? 0 } : {}),
  };
}

const PAX_MARK = "PaxHeaders.test/";

/**
 * The PAX header of `name` with its xattrs. tar-stream takes no body for a pax-header entry:
 * written as a file named PAX_MARK..., retyped by retypePax.
 */
function paxEntry(p: ReturnType<typeof pack>, name: string, xattrs: Record<string, Buffer>): void {
  const pax = paxRecords(
    Object.fromEntries(Object.entries(xattrs).map(([k, v]) => [`SCHILY.xattr.${k}`, v])),
  );
  p.entry({ name: `${PAX_MARK}${name}`.slice(0, 99), type: "file", size: pax.length }, pax);
}

/** Each header named PAX_MARK... becomes a PAX extended header (typeflag 'x'), checksum redone. */
function retypePax(tar: Buffer): Buffer {
  for (let off = 0; off + 512 <= tar.length;) {
    const h = tar.subarray(off, off + 512);
    if (h.every((b) => b === 0)) break;
    const size = Number.parseInt(h.subarray(124, 136).toString("latin1").replace(/\0.*$/, ""), 8);
    if (h.subarray(0, PAX_MARK.length).toString("latin1") === PAX_MARK) {
      h[156] = "x".charCodeAt(0);
      h.fill(0x20, 148, 156);
      const sum = h.reduce((a, b) => a + b, 0);
      h.write(`${sum.toString(8).padStart(6, "0")}\0 `, 148, "latin1");
    }
    off += 512 + Math.ceil(size / 512) * 512;
  }
  return tar;
}

const sha = (b: Buffer): string => `sha256:${createHash("sha256").update(b).digest("hex")}`;

async function blob(dir: string, b: Buffer): Promise<string> {
  const d = sha(b);
  await mkdir(path.join(dir, "blobs", "sha256"), { recursive: true });
  await writeFile(path.join(dir, "blobs", "sha256", d.slice(7)), b);
  return d;
}

export interface LayoutOptions {
  labels?: Record<string, string>;
  gzip?: boolean;
  created?: string;
  /** Media type written for every layer (default: tar or tar+gzip). */
  layerMediaType?: string;
  /** The ref name annotation of the manifest in index.json. */
  refName?: string;
}

export interface Layout {
  dir: string;
  manifestDigest: string;
  configDigest: string;
  layerDigests: string[];
}

/** Writes an OCI layout of `layers` (each a list of entries, lowest first) into `dir`. */
export async function writeLayout(
  dir: string,
  layers: TarEntry[][],
  o: LayoutOptions = {},
): Promise<Layout> {
  await mkdir(dir, { recursive: true });
  const diffIds: string[] = [];
  const descs: { mediaType: string; digest: string; size: number }[] = [];
  for (const l of layers) {
    const tar = await tarOf(l);
    diffIds.push(sha(tar));
    const body = o.gzip ? gzipSync(tar) : tar;
    descs.push({
      mediaType:
        o.layerMediaType ??
        (o.gzip
          ? "application/vnd.oci.image.layer.v1.tar+gzip"
          : "application/vnd.oci.image.layer.v1.tar"),
      digest: await blob(dir, body),
      size: body.length,
    });
  }
  const config = Buffer.from(
    JSON.stringify({
      created: o.created ?? "2026-11-01T00:00:00Z",
      architecture: "amd64",
      os: "linux",
      config: { Labels: o.labels ?? {} },
      rootfs: { type: "layers", diff_ids: diffIds },
    }),
  );
  const configDigest = await blob(dir, config);
  const manifest = Buffer.from(
    JSON.stringify({
      schemaVersion: 2,
      mediaType: "application/vnd.oci.image.manifest.v1+json",
      config: {
        mediaType: "application/vnd.oci.image.config.v1+json",
        digest: configDigest,
        size: config.length,
      },
      layers: descs,
    }),
  );
  const manifestDigest = await blob(dir, manifest);
  await writeFile(path.join(dir, "oci-layout"), JSON.stringify({ imageLayoutVersion: "1.0.0" }));
  await writeFile(
    path.join(dir, "index.json"),
    JSON.stringify({
      schemaVersion: 2,
      mediaType: "application/vnd.oci.image.index.v1+json",
      manifests: [
        {
          mediaType: "application/vnd.oci.image.manifest.v1+json",
          digest: manifestDigest,
          size: manifest.length,
          ...(o.refName === undefined
            ? {}
            : { annotations: { "org.opencontainers.image.ref.name": o.refName } }),
        },
      ],
    }),
  );
  return { dir, manifestDigest, configDigest, layerDigests: descs.map((d) => d.digest) };
}

/** A tar of the layout directory: an oci-archive. */
export async function writeArchive(layoutDir: string, file: string): Promise<void> {
  const entries: TarEntry[] = [];
  const walk = async (rel: string): Promise<void> => {
    for (const n of (await readdir(path.join(layoutDir, rel))).sort()) {
      const p = rel === "" ? n : `${rel}/${n}`;
      if ((await stat(path.join(layoutDir, p))).isDirectory()) {
        entries.push({ name: `${p}/`, type: "directory" });
        await walk(p);
      } else entries.push({ name: p, content: await readFile(path.join(layoutDir, p)) });
    }
  };
  await walk("");
  await writeFile(file, await tarOf(entries));
}

/** A root filesystem's minimum for a release: a kernel and initrd where bootc puts them. */
export function bootcKernel(version = "6.12.0-1-amd64"): TarEntry[] {
  return [
    { name: "usr/", type: "directory" },
    { name: "usr/lib/", type: "directory" },
    { name: "usr/lib/modules/", type: "directory" },
    { name: `usr/lib/modules/${version}/`, type: "directory" },
    { name: `usr/lib/modules/${version}/vmlinuz`, content: `kernel ${version}\n` },
    { name: `usr/lib/modules/${version}/initramfs.img`, content: `initrd ${version}\n` },
  ];
}
