// `liken release build` writes the release into a hidden directory of the channel and renames
// it into place last: a build refused half way (an artifact missing after the first was
// copied) leaves nothing in the channel directory.
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { buildRelease } from "../../src/release/build.js";

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "liken-staged-"));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe("buildRelease", () => {
  it("leaves nothing in the channel when an artifact fails after another was copied", async () => {
    await writeFile(path.join(dir, "rootfs.img"), Buffer.alloc(8192, 1));
    const out = path.join(dir, "channel");
    await expect(
      buildRelease({
        version: "v1",
        out,
        artifacts: [
          { name: "rootfs", file: path.join(dir, "rootfs.img") },
          { name: "kernel", file: path.join(dir, "missing") },
        ],
      }),
    ).rejects.toMatchObject({ code: "ENOENT" });
    expect(await readdir(out)).toEqual([]);
  });

  it("publishes into place: release.yaml, artifacts, channel.yaml, no partial directory", async () => {
    await writeFile(path.join(dir, "rootfs.img"), Buffer.alloc(8192, 1));
    const out = path.join(dir, "channel");
    const r = await buildRelease({
      version: "v1",
      out,
      artifacts: [{ name: "rootfs", file: path.join(dir, "rootfs.img") }],
      notes: "hello",
    });
    expect((await readdir(out)).sort()).toEqual(["channel.yaml", "v1"]);
    expect((await readdir(r.dir)).sort()).toEqual([
      "notes.txt",
      "release.yaml",
      "rootfs.img",
      "rootfs.img.lkidx",
    ]);
  });
});
