// An OCI image from a Containerfile with the real buildah and umoci, no registry, no daemon
// (src/release/from-image/containerfile.ts): a root filesystem directory imported as one layer, a
// Containerfile FROM it built into the same OCI layout, read by `--from-image`; the same
// Containerfile built again in a new buildah session gives the same release digest (buildah
// --timestamp); buildah's storage is gone afterwards; a failing build says which step, which
// command and what buildah said, and leaves no storage behind either.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { needsTool } from "../support/tool-build.js";
import { chmod, mkdir, mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { importRootfs, withBuildah } from "../../src/release/from-image/containerfile.js";
import { buildReleaseFromImage } from "../../src/release/from-image/from-image.js";
import { readOciLayout } from "../../src/release/from-image/oci.js";

const MiB = 1024 * 1024;
const EPOCH = 1_764_547_200;
let dir: string;
let umoci: string;

needsTool("umoci", (bin) => (umoci = bin));
beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "liken-containerfile-"));
  const root = path.join(dir, "rootfs");
  await mkdir(path.join(root, "usr/lib/modules/6.1.0-test"), { recursive: true });
  await mkdir(path.join(root, "etc"), { recursive: true });
  await writeFile(path.join(root, "usr/lib/modules/6.1.0-test/vmlinuz"), "kernel\n");
  await writeFile(path.join(root, "usr/lib/modules/6.1.0-test/initramfs.img"), "initrd v1\n");
  await writeFile(path.join(root, "etc/os-release"), 'VERSION="1"\n');
  await chmod(path.join(root, "etc/os-release"), 0o644);
}, 600_000);

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** A context with the changed files under over/, and its Containerfile FROM `from`. */
async function context(name: string, from: string): Promise<{ context: string; text: string }> {
  const ctx = path.join(dir, "ctx", name);
  await mkdir(path.join(ctx, "over/etc"), { recursive: true });
  await writeFile(path.join(ctx, "over/etc/os-release"), `VERSION="${name}"\n`);
  const text = `FROM ${from}\nCOPY over/ /\nLABEL org.opencontainers.image.version=${name}\n`;
  return { context: ctx, text };
}

const leftovers = async (d: string): Promise<string[]> =>
  (await readdir(d)).filter((n) => n.startsWith(".liken-buildah-"));

describe("an image from a Containerfile (buildah, umoci)", () => {
  it("imports a root filesystem, builds FROM it, and the same Containerfile gives the same release", async () => {
    const work = path.join(dir, "work");
    await mkdir(work, { recursive: true });
    const layout = path.join(work, "images");
    const base = await importRootfs({
      rootfs: path.join(dir, "rootfs"),
      layout,
      name: "base",
      umoci,
      sourceDateEpoch: EPOCH,
    });
    expect(base).toBe(`oci:${layout}:base`);
    const { context: ctx, text } = await context("2", "oci:images:base");
    const digests: string[] = [];
    for (const name of ["first", "second"]) {
      const ref = await withBuildah({ workDir: work, sourceDateEpoch: EPOCH }, (b) =>
        b.build({ containerfile: text, context: ctx, layout, name, cwd: work }),
      );
      expect(ref).toBe(`oci:${layout}:${name}`);
      // Nothing of buildah's storage stays, and the context is as it was.
      expect(await leftovers(work)).toEqual([]);
      expect((await readdir(ctx)).sort()).toEqual(["over"]);
      const image = await readOciLayout(ref);
      expect(image.layers).toHaveLength(2);
      expect(image.labels["org.opencontainers.image.version"]).toBe("2");
      await image.close();
      const r = await buildReleaseFromImage({
        ref,
        out: path.join(dir, `channel-${name}`),
        slotSizeBytes: 8 * MiB,
      });
      expect(r.version).toBe("2");
      expect(r.boot.version).toBe("6.1.0-test");
      expect(r.sourceDateEpoch).toBe(EPOCH);
      digests.push(r.digest);
    }
    expect(digests[1]).toBe(digests[0]);
  }, 600_000);

  it("a failing build names the step, the command and buildah's message, and leaves no storage", async () => {
    const work = path.join(dir, "fails");
    await mkdir(work, { recursive: true });
    const { context: ctx } = await context("3", "scratch");
    const err = await withBuildah({ workDir: work, sourceDateEpoch: EPOCH }, (b) =>
      b.build({
        containerfile: "FROM scratch\nCOPY not-in-the-context /\n",
        context: ctx,
        layout: path.join(work, "images"),
        name: "3",
      }),
    ).catch((e: unknown) => e);
    expect(err).toMatchObject({
      code: "LIKEN_IMAGE_BUILD",
      message: expect.stringMatching(
        /^buildah: 3 from .*Containerfile\.liken: `buildah .* bud .*` failed \(exit \d+\): [\s\S]*not-in-the-context/,
      ),
    });
    expect(await leftovers(work)).toEqual([]);
  }, 600_000);

  it("a missing tool is named, with where it comes from", async () => {
    const err = await importRootfs({
      rootfs: path.join(dir, "rootfs"),
      layout: path.join(dir, "nowhere", "images"),
      name: "base",
      umoci: path.join(dir, "no-umoci-here"),
      sourceDateEpoch: EPOCH,
      workDir: dir,
    }).catch((e: unknown) => e);
    expect(err).toMatchObject({
      code: "LIKEN_IMAGE_BUILD",
      message: expect.stringContaining("no-umoci-here is not installed"),
    });
  });
});
