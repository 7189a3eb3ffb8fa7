// `liken release build`'s two sources: -a artifacts or --from-image, one of them; --from-image
// needs the slot size; a zstd layer on a Node without zstd is refused saying what to do.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import zlib from "node:zlib";
import { Command } from "commander";
import { registerRelease } from "../../src/cli/commands/release.js";
import { unpackLayers } from "../../src/release/from-image/unpack.js";

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "liken-image-cli-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

function liken(...args: string[]): Promise<unknown> {
  const program = new Command("liken").exitOverride();
  registerRelease(program);
  return program.parseAsync(["node", "liken", ...args]);
}

describe("liken release build", () => {
  it.each([
    [["--out", "x", "--version", "v1"], "LIKEN_RELEASE_NO_SOURCE"],
    [
      ["--out", "x", "--version", "v1", "-a", "rootfs=a.img", "--from-image", "img"],
      "LIKEN_RELEASE_NO_SOURCE",
    ],
    [["--out", "x", "--from-image", "img"], "LIKEN_RELEASE_NO_SLOT_SIZE"],
    [
      ["--out", "x", "--from-image", "img", "--slot-size", "1G", "--fs", "xfs"],
      "LIKEN_RELEASE_BAD_FS",
    ],
    [["--out", "x", "-a", "rootfs=a.img"], "LIKEN_RELEASE_BAD_VERSION"],
  ])("%j is refused with %s", async (args, code) => {
    await expect(liken("release", "build", ...args)).rejects.toMatchObject({ code });
  });
});

describe("zstd layers", () => {
  const hasZstd = "createZstdDecompress" in zlib;
  it(hasZstd ? "are read where Node has zstd" : "are refused on a Node without zstd", async () => {
    const file = path.join(dir, "layer.tar.zst");
    await writeFile(file, Buffer.alloc(0));
    const run = unpackLayers(
      [{ name: "layer 0", file, mediaType: "application/vnd.oci.image.layer.v1.tar+zstd" }],
      { contentDir: path.join(dir, "c"), sourceDateEpoch: 0 },
    );
    if (hasZstd) await expect(run).rejects.not.toMatchObject({ code: "LIKEN_IMAGE_COMPRESSION" });
    else {
      await expect(run).rejects.toMatchObject({
        code: "LIKEN_IMAGE_COMPRESSION",
        message: expect.stringContaining("--compression-format gzip"),
      });
    }
  });
});
