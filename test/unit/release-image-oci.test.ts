// Reading an OCI layout for `liken release build --from-image`: what buildah and skopeo write is
// read; an unknown media type, a blob whose bytes or size differ from its descriptor, a
// damaged layer (diff_id) are refused naming the blob.
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { gzipSync } from "node:zlib";
import { parseImageRef, readOciLayout } from "../../src/release/from-image/oci.js";
import { layersOf, unpackLayers } from "../../src/release/from-image/unpack.js";
import { bootcKernel, writeArchive, writeLayout } from "../support/oci-layout.js";

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "liken-oci-"));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const blobOf = (layout: string, digest: string): string =>
  path.join(layout, "blobs", "sha256", digest.slice("sha256:".length));

describe("parseImageRef", () => {
  it.each([
    ["img", { kind: "dir", path: "img" }],
    ["oci:img", { kind: "dir", path: "img" }],
    ["oci:img:v1", { kind: "dir", path: "img", tag: "v1" }],
    ["oci-archive:/tmp/a.tar", { kind: "archive", path: "/tmp/a.tar" }],
    ["oci-archive:/tmp/a.tar:base", { kind: "archive", path: "/tmp/a.tar", tag: "base" }],
  ])("%s", (ref, want) => {
    expect(parseImageRef(ref)).toEqual(want);
  });
});

describe("readOciLayout", () => {
  it("reads a layout and an oci-archive of it, labels and layers", async () => {
    const l = await writeLayout(
      path.join(dir, "img"),
      [bootcKernel(), [{ name: "etc/x", content: "x" }]],
      {
        labels: { "org.opencontainers.image.version": "2026.12.05-001" },
        gzip: true,
        refName: "base",
      },
    );
    const img = await readOciLayout(l.dir);
    expect(img.manifestDigest).toBe(l.manifestDigest);
    expect(img.layers.map((d) => d.digest)).toEqual(l.layerDigests);
    expect(img.labels["org.opencontainers.image.version"]).toBe("2026.12.05-001");
    expect(img.created).toBe(Date.parse("2026-11-01T00:00:00Z") / 1000);
    await writeArchive(l.dir, path.join(dir, "img.tar"));
    const arch = await readOciLayout(`oci-archive:${path.join(dir, "img.tar")}:base`, {
      workDir: dir,
    });
    expect(arch.manifestDigest).toBe(l.manifestDigest);
    await arch.close();
    await expect(
      readOciLayout(`oci-archive:${path.join(dir, "img.tar")}:other`, { workDir: dir }),
    ).rejects.toMatchObject({ code: "LIKEN_IMAGE_MANIFEST_CHOICE" });
  });

  it("refuses an unknown layer media type, naming the blob", async () => {
    const l = await writeLayout(path.join(dir, "img"), [bootcKernel()], {
      layerMediaType: "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip",
    });
    await expect(readOciLayout(l.dir)).rejects.toMatchObject({
      code: "LIKEN_IMAGE_MEDIA_TYPE",
      message: expect.stringContaining(
        `layer 0 ${l.layerDigests[0]}: media type "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip"`,
      ),
    });
  });

  it("refuses an unknown manifest media type in index.json", async () => {
    const l = await writeLayout(path.join(dir, "img"), [bootcKernel()]);
    const index = JSON.parse(await readFile(path.join(l.dir, "index.json"), "utf8"));
    index.manifests[0].mediaType = "application/vnd.docker.distribution.manifest.v2+json";
    await writeFile(path.join(l.dir, "index.json"), JSON.stringify(index));
    await expect(readOciLayout(l.dir)).rejects.toMatchObject({ code: "LIKEN_IMAGE_MEDIA_TYPE" });
  });

  it("refuses a layer whose bytes differ from its digest", async () => {
    const l = await writeLayout(path.join(dir, "img"), [bootcKernel()]);
    const f = blobOf(l.dir, l.layerDigests[0]!);
    const b = await readFile(f);
    b[600] = b[600]! ^ 1;
    await writeFile(f, b);
    await expect(readOciLayout(l.dir)).rejects.toMatchObject({
      code: "LIKEN_IMAGE_DIGEST",
      message: expect.stringMatching(
        /^layer 0 sha256:[0-9a-f]{64}: the blob's bytes hash to sha256:/,
      ),
    });
  });

  it("refuses a blob whose size differs from its descriptor", async () => {
    const l = await writeLayout(path.join(dir, "img"), [bootcKernel()]);
    const f = blobOf(l.dir, l.configDigest);
    await writeFile(f, Buffer.concat([await readFile(f), Buffer.from(" ")]));
    await expect(readOciLayout(l.dir)).rejects.toMatchObject({
      code: "LIKEN_IMAGE_DIGEST",
      message: expect.stringContaining(`image config ${l.configDigest}: the blob has`),
    });
  });

  it("refuses a missing blob", async () => {
    const l = await writeLayout(path.join(dir, "img"), [bootcKernel()]);
    await rm(blobOf(l.dir, l.manifestDigest));
    await expect(readOciLayout(l.dir)).rejects.toMatchObject({
      code: "LIKEN_IMAGE_DIGEST",
      message: expect.stringContaining("blob missing"),
    });
  });

  it("refuses a directory that is not a layout", async () => {
    await expect(readOciLayout(dir)).rejects.toMatchObject({ code: "LIKEN_IMAGE_REF" });
  });

  it("refuses a layer whose uncompressed bytes differ from the config's diff_id", async () => {
    const l = await writeLayout(path.join(dir, "img"), [bootcKernel()], { gzip: true });
    // Rewrite the layer as another gzip of other bytes, and its descriptor to match: only the
    // config's diff_id still names the original tar.
    const other = gzipSync(Buffer.alloc(1024));
    const img = await readOciLayout(l.dir);
    const layers = layersOf(img);
    await writeFile(layers[0]!.file, other);
    await expect(
      unpackLayers(layers, { contentDir: path.join(dir, "c"), sourceDateEpoch: 0 }),
    ).rejects.toMatchObject({
      code: "LIKEN_IMAGE_DIGEST",
      message: expect.stringContaining("diff_id"),
    });
  });
});
