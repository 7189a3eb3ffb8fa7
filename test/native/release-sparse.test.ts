// A release of a large, mostly empty slot: `liken release build` publishes the image sparse (its
// zero blocks holes, st_blocks far below its size) in a directory a web server running as
// another user can read (0755, files 0644, whatever the builder's umask), says what it takes on
// disk and on the wire, and the tools that read slots (bench:delta's) read one over 2 GiB, the
// size past which readFile refuses a file (ERR_FS_FILE_TOO_LARGE). Sparse files make a 2.2 GiB
// slot cost a few MiB here.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { randomBytes } from "node:crypto";
import { open, mkdtemp, readdir, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { digestOfFile, missingOf, slotOf } from "../../bench/delta-files.js";
import { buildRelease } from "../../src/release/build.js";
import { sizesLine } from "../../src/release/sizes.js";

const MiB = 1024 * 1024;
/** Past 2 GiB (2048 MiB): where a Buffer-based reader fails. */
const SLOT = 2200 * MiB;
let dir: string;
let image: string;

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "liken-sparse-"));
  image = path.join(dir, "slot.img");
  const f = await open(image, "w");
  try {
    // Data at the start, in the middle and past 2 GiB; zeros everywhere else.
    for (const at of [0, 1000 * MiB, 2100 * MiB]) await f.write(randomBytes(MiB), 0, MiB, at);
    await f.truncate(SLOT);
  } finally {
    await f.close();
  }
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe("a release of a 2.2 GiB slot", () => {
  it("is published sparse, readable by others, with its sizes", async () => {
    const before = process.umask(0o077);
    let r: Awaited<ReturnType<typeof buildRelease>>;
    try {
      r = await buildRelease({
        version: "v1",
        out: path.join(dir, "channel"),
        artifacts: [{ name: "rootfs", file: image }],
        // The pack and index are the same with or without holes; left out, the test is quicker.
        index: false,
      });
    } finally {
      process.umask(before);
    }
    const published = path.join(r.dir, "slot.img");
    const st = await stat(published);
    expect(st.size).toBe(SLOT);
    // 3 MiB of data: a few MiB on disk, not 2.2 GiB (Node's copyFile wrote every zero).
    expect(st.blocks * 512).toBeLessThan(16 * MiB);
    expect((await stat(r.dir)).mode & 0o777).toBe(0o755);
    for (const n of await readdir(r.dir)) {
      expect([n, (await stat(path.join(r.dir, n))).mode & 0o777]).toEqual([n, 0o644]);
    }
    expect(r.sizes.artifacts).toBe(SLOT);
    expect(r.sizes.disk).toBeLessThan(16 * MiB);
    expect(r.sizes.packed).toBeUndefined();
    expect(sizesLine("v1", r.sizes)).toMatch(
      /^# v1: 2\.1 GiB of artifacts, \d+\.\d MiB on disk, 2\.1 GiB on the wire/,
    );

    // bench:delta's readers: the slot the release makes, byte for byte the image, every chunk
    // of it found in the image (streamed: a Buffer of it would be refused).
    const slot = await slotOf(r.dir, path.join(dir, "slot-of-release.img"));
    expect((await stat(slot)).blocks * 512).toBeLessThan(16 * MiB);
    expect(`sha256:${await digestOfFile(slot)}`).toBe(r.release.artifacts[0]!.digest);
    expect((await missingOf(image, slot)).filter(Boolean)).toEqual([]);
  }, 300_000);
});
