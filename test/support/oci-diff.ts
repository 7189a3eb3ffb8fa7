// What differs between two builds of one image, file by file: the tests that check a build is
// reproducible name the files that differ, not only two digests (diffoscope's job, for the
// layers' tar entries only: path, type, mode, owner, mtime, link target, xattrs and a SHA-256
// of the content). Reads an OCI layout directory's index.json, its one manifest, and the
// uncompressed or gzip layers it lists. Run by hand on two builds (docs/day-1.md, step 3):
//   npx tsx test/support/oci-diff.ts images-1 images-2
import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import { readFile } from "node:fs/promises";
import path from "node:path";
import { pipeline } from "node:stream/promises";
import { fileURLToPath } from "node:url";
import { createGunzip } from "node:zlib";
import { extract, type Header } from "tar-stream";

export interface ImageDigests {
  manifest: string;
  config: string;
  layers: { digest: string; mediaType: string }[];
}

interface Descriptor {
  digest: string;
  mediaType: string;
}

function blobPath(layout: string, digest: string): string {
  const [alg, hex] = digest.split(":");
  return path.join(layout, "blobs", alg!, hex!);
}

/** The manifest, config and layer digests of the one image in an OCI layout directory. */
export async function imageDigests(layout: string): Promise<ImageDigests> {
  const index = JSON.parse(await readFile(path.join(layout, "index.json"), "utf8")) as {
    manifests?: Descriptor[];
  };
  if (index.manifests?.length !== 1)
    throw new Error(
      `${layout}/index.json lists ${index.manifests?.length ?? 0} manifests, expected the one image built`,
    );
  const manifest = index.manifests[0]!.digest;
  const m = JSON.parse(await readFile(blobPath(layout, manifest), "utf8")) as {
    config: Descriptor;
    layers: Descriptor[];
  };
  return {
    manifest,
    config: m.config.digest,
    layers: m.layers.map((l) => ({ digest: l.digest, mediaType: l.mediaType })),
  };
}

/** One tar entry as a line: everything a reproducible build must keep equal. */
async function entries(file: string, gzip: boolean): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  const x = extract();
  x.on("entry", (h: Header, body, next) => {
    const hash = createHash("sha256");
    body.on("data", (b: unknown) => void hash.update(b as Buffer));
    body.on("end", () => {
      const xattrs = Object.entries(h.pax ?? {})
        .filter(([k]) => k.startsWith("SCHILY.xattr."))
        .map(([k, v]) => `${k.slice(13)}=${v}`)
        .sort()
        .join(",");
      out.set(
        h.name,
        [
          h.type,
          `mode=${(h.mode ?? 0).toString(8)}`,
          `owner=${h.uid}:${h.gid}`,
          `mtime=${h.mtime === undefined ? "-" : h.mtime.getTime() / 1000}`,
          h.linkname ? `link=${h.linkname}` : "",
          xattrs ? `xattrs=${xattrs}` : "",
          h.type === "file" ? `sha256=${hash.digest("hex").slice(0, 16)} size=${h.size}` : "",
        ]
          .filter((s) => s !== "")
          .join(" "),
      );
      next();
    });
    body.resume();
  });
  const src = createReadStream(file);
  await (gzip ? pipeline(src, createGunzip(), x) : pipeline(src, x));
  return out;
}

/**
 * The entries that differ between two layers, one line each (`path: a | b`, `-` where one
 * side lacks it), sorted by path; at most `limit` lines and a count of the rest.
 */
export async function layerDifferences(
  a: { layout: string; layer: Descriptor },
  b: { layout: string; layer: Descriptor },
  limit = 40,
): Promise<string[]> {
  const [ea, eb] = await Promise.all([
    layerEntries(a.layout, a.layer),
    layerEntries(b.layout, b.layer),
  ]);
  const names = [...new Set([...ea.keys(), ...eb.keys()])].sort();
  const diff = names
    .filter((n) => ea.get(n) !== eb.get(n))
    .map((n) => `${n}: ${ea.get(n) ?? "-"} | ${eb.get(n) ?? "-"}`);
  const orderA = [...ea.keys()].join("\n");
  const orderB = [...eb.keys()].join("\n");
  if (diff.length === 0 && orderA !== orderB) diff.push("(same entries, in another order)");
  return diff.length > limit
    ? [...diff.slice(0, limit), `... and ${diff.length - limit} more`]
    : diff;
}

/** A layer's entries, path -> one line of what a reproducible build keeps equal. */
export function layerEntries(layout: string, layer: Descriptor): Promise<Map<string, string>> {
  return entries(blobPath(layout, layer.digest), layer.mediaType.endsWith("gzip"));
}

/** Every difference between two builds: manifests, configs and layer by layer. */
export async function imageDifferences(a: string, b: string): Promise<string[]> {
  const [da, db] = await Promise.all([imageDigests(a), imageDigests(b)]);
  const out: string[] = [];
  if (da.config !== db.config) {
    const ca = await readFile(blobPath(a, da.config), "utf8");
    const cb = await readFile(blobPath(b, db.config), "utf8");
    out.push(`config ${da.config} | ${db.config}`, `  ${ca}`, `  ${cb}`);
  }
  if (da.layers.length !== db.layers.length)
    return [...out, `layers: ${da.layers.length} | ${db.layers.length}`];
  for (let i = 0; i < da.layers.length; i++) {
    const la = da.layers[i]!;
    const lb = db.layers[i]!;
    if (la.digest === lb.digest) continue;
    out.push(`layer ${i} ${la.digest} | ${lb.digest}`);
    for (const d of await layerDifferences({ layout: a, layer: la }, { layout: b, layer: lb }))
      out.push(`  ${d}`);
  }
  return out;
}

if (
  process.argv[1] !== undefined &&
  fileURLToPath(import.meta.url) === path.resolve(process.argv[1])
) {
  const [a, b] = process.argv.slice(2);
  if (a === undefined || b === undefined) {
    process.stderr.write("usage: npx tsx test/support/oci-diff.ts LAYOUT-1 LAYOUT-2\n");
    process.exit(2);
  }
  const diff = await imageDifferences(a, b);
  process.stdout.write(
    diff.length === 0
      ? `the same image: ${(await imageDigests(a)).manifest}\n`
      : `${diff.join("\n")}\n`,
  );
  process.exit(diff.length === 0 ? 0 : 1);
}
