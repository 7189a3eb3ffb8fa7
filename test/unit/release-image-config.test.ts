// What the image config says, or leaves out. `created` is optional in the OCI image spec: an
// image without it, built with no SOURCE_DATE_EPOCH, still gives the same bytes every time (the
// build's clock never reaches the filesystem). `architecture`: a multi-platform index gives the
// manifest of the platform asked for (default: this machine's), and a config for another
// architecture than the one asked for is refused.
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createHash } from "node:crypto";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { makeFilesystemImage } from "../../src/release/from-image/fs.js";
import { buildReleaseFromImage } from "../../src/release/from-image/from-image.js";
import { readOciLayout } from "../../src/release/from-image/oci.js";
import { Tree } from "../../src/release/from-image/tree.js";
import { bootcKernel, writeLayout, type TarEntry } from "../support/oci-layout.js";

const MiB = 1024 * 1024;
let dir: string;
let savedEpoch: string | undefined;
beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "liken-image-config-"));
  savedEpoch = process.env.SOURCE_DATE_EPOCH;
  delete process.env.SOURCE_DATE_EPOCH;
});
afterEach(async () => {
  if (savedEpoch !== undefined) process.env.SOURCE_DATE_EPOCH = savedEpoch;
  await rm(dir, { recursive: true, force: true });
});

interface Desc {
  mediaType: string;
  digest: string;
  size: number;
  platform?: { os: string; architecture: string };
}

async function putBlob(layout: string, mediaType: string, b: Buffer): Promise<Desc> {
  const hex = createHash("sha256").update(b).digest("hex");
  await mkdir(path.join(layout, "blobs", "sha256"), { recursive: true });
  await writeFile(path.join(layout, "blobs", "sha256", hex), b);
  return { mediaType, digest: `sha256:${hex}`, size: b.length };
}

const readBlob = async (layout: string, digest: string): Promise<Record<string, unknown>> =>
  JSON.parse(await readFile(path.join(layout, "blobs", "sha256", digest.slice(7)), "utf8"));

/** Edits the config of index.json's one manifest; writes the new config, manifest and index. */
async function editConfig(
  layout: string,
  edit: (c: Record<string, unknown>) => void,
): Promise<Desc> {
  const index = JSON.parse(await readFile(path.join(layout, "index.json"), "utf8"));
  const manifest = await readBlob(layout, index.manifests[0].digest);
  const config = await readBlob(layout, (manifest.config as Desc).digest);
  edit(config);
  manifest.config = await putBlob(
    layout,
    "application/vnd.oci.image.config.v1+json",
    Buffer.from(JSON.stringify(config)),
  );
  const desc = await putBlob(
    layout,
    "application/vnd.oci.image.manifest.v1+json",
    Buffer.from(JSON.stringify(manifest)),
  );
  index.manifests = [desc];
  await writeFile(path.join(layout, "index.json"), JSON.stringify(index));
  return desc;
}

const image = (version: string): TarEntry[][] => [
  [
    { name: "etc/", type: "directory" },
    { name: "etc/os-release", content: `VERSION_ID=${version}\n`, mtime: 1_712_345_678 },
    ...bootcKernel(),
  ],
];

describe("an image config without `created`", () => {
  it("builds the same bytes twice with no SOURCE_DATE_EPOCH: the newest mtime of its layers", async () => {
    const l = await writeLayout(path.join(dir, "img"), image("1"));
    await editConfig(l.dir, (c) => delete c.created);
    expect((await readOciLayout(l.dir)).created).toBeUndefined();
    const build = (out: string): ReturnType<typeof buildReleaseFromImage> =>
      buildReleaseFromImage({
        ref: l.dir,
        out: path.join(dir, out),
        slotSizeBytes: 16 * MiB,
        version: "v1",
      });
    const t0 = Date.now();
    const r1 = await build("one");
    // ext4 keeps whole seconds: the second build runs in another one.
    while (Date.now() - t0 < 1100) await new Promise((r) => setTimeout(r, 50));
    const r2 = await build("two");
    expect(r2.digest).toBe(r1.digest);
    const a = await readFile(path.join(r1.dir, "rootfs.img"));
    expect((await readFile(path.join(r2.dir, "rootfs.img"))).equals(a)).toBe(true);
    expect(r1.sourceDateEpoch).toBe(1_712_345_678);
  });

  it("an ext4 made at time 0 is the same bytes at another moment (e2fsprogs reads 0 as now)", async () => {
    const tree = new Tree(dir, { mode: 0o755, uid: 0, gid: 0, mtime: 0 });
    tree.paths.set("etc", { kind: "dir", meta: { mode: 0o755, uid: 0, gid: 0, mtime: 0 } });
    const make = async (name: string): Promise<Buffer> => {
      const out = path.join(dir, name);
      await makeFilesystemImage({
        tree,
        fs: "ext4",
        out,
        sizeBytes: 8 * MiB,
        sourceDateEpoch: 0,
        uuid: "11111111-2222-4333-8444-555555555555",
      });
      return readFile(out);
    };
    const t0 = Date.now();
    const a = await make("a.img");
    while (Date.now() - t0 < 1100) await new Promise((r) => setTimeout(r, 50));
    expect((await make("b.img")).equals(a)).toBe(true);
  });
});

describe("a multi-platform image index", () => {
  /** One layout with an amd64 image (version 1) and an arm64 one (version 2). */
  async function twoPlatforms(): Promise<{ layout: string; amd64: Desc; arm64: Desc }> {
    const layout = path.join(dir, "multi");
    await writeLayout(layout, image("1"), { labels: { "org.opencontainers.image.version": "1" } });
    const amd64 = await editConfig(layout, () => undefined);
    await writeLayout(layout, image("2"), { labels: { "org.opencontainers.image.version": "2" } });
    const arm64 = await editConfig(layout, (c) => (c.architecture = "arm64"));
    await writeIndex(layout, [
      { ...amd64, platform: { os: "linux", architecture: "amd64" } },
      { ...arm64, platform: { os: "linux", architecture: "arm64" } },
    ]);
    return { layout, amd64, arm64 };
  }

  const writeIndex = (layout: string, manifests: Desc[]): Promise<void> =>
    writeFile(
      path.join(layout, "index.json"),
      JSON.stringify({
        schemaVersion: 2,
        mediaType: "application/vnd.oci.image.index.v1+json",
        manifests,
      }),
    );

  it("gives the manifest of the platform asked for", async () => {
    const { layout, amd64, arm64 } = await twoPlatforms();
    const arm = await readOciLayout(layout, { platform: "linux/arm64" });
    expect([arm.manifestDigest, arm.architecture]).toEqual([arm64.digest, "arm64"]);
    const amd = await readOciLayout(layout, { platform: "linux/amd64" });
    expect([amd.manifestDigest, amd.architecture]).toEqual([amd64.digest, "amd64"]);
    const r = await buildReleaseFromImage({
      ref: layout,
      out: path.join(dir, "channel"),
      slotSizeBytes: 16 * MiB,
      platform: "linux/arm64",
    });
    expect([r.manifestDigest, r.version]).toEqual([arm64.digest, "2"]);
  });

  it("refuses a platform the index does not have, listing those it has", async () => {
    const { layout } = await twoPlatforms();
    await expect(readOciLayout(layout, { platform: "linux/riscv64" })).rejects.toMatchObject({
      code: "LIKEN_IMAGE_MANIFEST_CHOICE",
      message: expect.stringMatching(/no image manifest for linux\/riscv64 among \[.*linux\/arm64/),
    });
  });

  it("refuses a manifest whose config is for another architecture than the one asked for", async () => {
    const { layout, amd64, arm64 } = await twoPlatforms();
    // The index says arm64 of the amd64 image: its config says otherwise.
    await writeIndex(layout, [
      { ...amd64, platform: { os: "linux", architecture: "arm64" } },
      { ...arm64, platform: { os: "linux", architecture: "amd64" } },
    ]);
    await expect(readOciLayout(layout, { platform: "linux/arm64" })).rejects.toMatchObject({
      code: "LIKEN_IMAGE_MANIFEST_CHOICE",
      message: expect.stringMatching(
        /^image config sha256:[0-9a-f]{64} is for linux\/amd64, not the linux\/arm64 asked for/,
      ),
    });
    // A single image for another architecture, with a platform asked for.
    const one = await writeLayout(path.join(dir, "one"), image("1"));
    await expect(readOciLayout(one.dir, { platform: "linux/arm64" })).rejects.toMatchObject({
      code: "LIKEN_IMAGE_MANIFEST_CHOICE",
    });
    // ...and without one, the image is what it is: a release for another architecture may be
    // built on any machine.
    expect((await readOciLayout(one.dir)).architecture).toBe("amd64");
  });

  it("refuses a platform that is not os/architecture[/variant]", async () => {
    const { layout } = await twoPlatforms();
    await expect(readOciLayout(layout, { platform: "arm64" })).rejects.toMatchObject({
      code: "LIKEN_IMAGE_REF",
      message: expect.stringContaining("linux/arm64"),
    });
  });
});
