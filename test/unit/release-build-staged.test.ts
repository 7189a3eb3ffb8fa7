// `liken release build` writes the release into a hidden directory of the channel and renames
// it into place last: a build refused half way (after its artifacts were copied) leaves nothing
// in the channel directory. An artifact that cannot be read is refused before anything is
// written at all.
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
  it("leaves nothing in the channel when the release is refused after its artifacts were copied", async () => {
    await writeFile(path.join(dir, "rootfs.img"), Buffer.alloc(8192, 1));
    await writeFile(path.join(dir, "other.img"), Buffer.alloc(8192, 2));
    const out = path.join(dir, "channel");
    // Two artifacts of one name: both are copied, then release.yaml's own check refuses it.
    const err = await buildRelease({
      version: "v1",
      out,
      artifacts: [
        { name: "rootfs", file: path.join(dir, "rootfs.img") },
        { name: "rootfs", file: path.join(dir, "other.img") },
      ],
    }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Error);
    expect(await readdir(out)).toEqual([]);
  });

  it("refuses an artifact that cannot be read before writing anything", async () => {
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
    ).rejects.toMatchObject({ code: "LIKEN_RELEASE_ARTIFACT_UNREADABLE" });
    expect(await readdir(dir)).toEqual(["rootfs.img"]);
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
      "rootfs.img.lkpack",
      "rootfs.img.lkpages",
      "rootfs.img.lktop",
    ]);
  });
});
