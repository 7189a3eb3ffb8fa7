// `liken release build --from-image`, end to end with the real mke2fs, debugfs and e2fsck:
// the same image gives the same release digest when built again in another directory, at
// another time, with another TZ, umask and working directory, by another user (a second
// process, as nobody when the test runs as root); the slot's
// filesystem holds what the layers say (owners, modes, set-uid, links, whiteouts) without
// root; a refused build leaves nothing in the channel directory nor beside it.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { execFile, execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { chmod, mkdir, mkdtemp, readdir, readFile, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { buildReleaseFromImage } from "../../src/release/from-image/from-image.js";
import { bootcKernel, writeArchive, writeLayout, type TarEntry } from "../support/oci-layout.js";

const MiB = 1024 * 1024;
let dir: string;
let archive: string;

/** Deterministic bytes that do not compress (a binary's worth). */
function noise(n: number, seed: string): Buffer {
  const out = Buffer.alloc(n);
  for (let o = 0, i = 0; o < n; o += 32, i++) {
    createHash("sha256").update(`${seed}${i}`).digest().copy(out, o);
  }
  return out;
}

/** struct vfs_cap_data, revision 2, effective: CAP_NET_RAW (13) and CAP_SETUID (7) permitted. */
const PING_CAPS = Buffer.from([1, 0, 0, 2, 0x80, 0x20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);

const base: TarEntry[] = [
  { name: "etc/", type: "directory" },
  { name: "etc/os-release", content: "ID=test\n" },
  { name: "etc/shadow", content: "root:*:1::::::\n", mode: 0o640, gid: 42 },
  { name: "etc/old.conf", content: "old\n" },
  { name: "usr/bin/", type: "directory" },
  { name: "usr/bin/su", content: noise(70_000, "su"), mode: 0o4755 },
  { name: "usr/bin/sh", content: noise(9_000, "sh"), mode: 0o755 },
  { name: "usr/bin/dash", type: "link", linkname: "usr/bin/sh" },
  { name: "bin", type: "symlink", linkname: "usr/bin" },
  // File capabilities, as buildah writes them: a PAX record of raw bytes (0x80 is CAP_SETUID's).
  {
    name: "usr/bin/ping",
    content: noise(5_000, "ping"),
    mode: 0o755,
    xattrs: { "security.capability": PING_CAPS, "user.note": Buffer.from("kept") },
  },
  // Absolute symlinks and symlinks pointing outside the root are entries like any other.
  { name: "etc/resolv.conf", type: "symlink", linkname: "/run/systemd/resolve/stub-resolv.conf" },
  { name: "etc/up", type: "symlink", linkname: "../../../.." },
  { name: "home/user/notes", content: "mine\n", uid: 1000, gid: 1000, mode: 0o600 },
  { name: "usr/share/data.bin", content: noise(1 * MiB, "data") },
  { name: 'usr/share/a name with "quotes" and spaces', content: "q\n" },
  ...bootcKernel("6.12.9-test"),
];
const upper: TarEntry[] = [
  { name: "etc/.wh.old.conf" },
  { name: "etc/os-release", content: "ID=test\nVERSION_ID=2\n", mtime: 4_000_000_000 },
];

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "liken-from-image-"));
  const l = await writeLayout(path.join(dir, "layout"), [base, upper], {
    gzip: true,
    labels: {
      "org.opencontainers.image.version": "2026.12.05-001",
      "org.opencontainers.image.description": "first image release",
    },
  });
  archive = path.join(dir, "image.oci.tar");
  await writeArchive(l.dir, archive);
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const debugfs = (img: string, cmd: string): string =>
  execFileSync("debugfs", ["-R", cmd, img], {
    encoding: "utf8",
    stdio: ["ignore", "pipe", "ignore"],
  });

describe("liken release build --from-image", () => {
  it("is reproducible to the byte: another directory, time, TZ, umask, user and process", async () => {
    const out1 = path.join(dir, "one", "channel");
    const t0 = Date.now();
    const r1 = await buildReleaseFromImage({
      ref: `oci-archive:${archive}`,
      out: out1,
      slotSizeBytes: 64 * MiB,
    });
    expect(r1.version).toBe("2026.12.05-001");
    expect(r1.release.artifacts.map((a) => [a.name, a.path])).toEqual([
      ["rootfs", "rootfs.img"],
      ["kernel", "vmlinuz"],
      ["initrd", "initrd.img"],
    ]);
    expect(await readFile(path.join(r1.dir, "notes.txt"), "utf8")).toBe("first image release");
    // The second build runs at least a second later (ext4 keeps whole seconds), in its own
    // process with another zone, umask and working directory.
    while (Date.now() - t0 < 1100) await new Promise((r) => setImmediate(r));
    const out2 = path.join(dir, "two", "deeper", "channel");
    const cwd = path.join(dir, "elsewhere");
    await mkdir(cwd, { recursive: true });
    const cli = path.resolve("src/cli/main.ts");
    const tsx = path.resolve("node_modules/.bin/tsx");
    const build = `umask 077; exec "${tsx}" "${cli}" release build --from-image "oci-archive:${archive}" --out "${out2}" --slot-size 64M`;
    // Run as root, the second build runs as nobody: no chown, so the same bytes without root.
    const asNobody = process.getuid?.() === 0;
    if (asNobody) {
      await chmod(dir, 0o755);
      await chmod(archive, 0o644);
      await mkdir(path.join(dir, "two"), { mode: 0o777 });
      await chmod(path.join(dir, "two"), 0o777);
      await chmod(cwd, 0o777);
    }
    const { stdout } = await promisify(execFile)(
      asNobody ? "setpriv" : "sh",
      [
        ...(asNobody ? ["--reuid=65534", "--regid=65534", "--clear-groups", "sh"] : []),
        "-c",
        build,
      ],
      {
        cwd,
        env: { ...process.env, TZ: "Pacific/Kiritimati", LC_ALL: "C", HOME: cwd, TMPDIR: cwd },
      },
    );
    expect(stdout).toContain(`digest: ${r1.digest}`);
    if (asNobody) expect((await stat(path.join(out2, r1.version))).uid).toBe(65534);
    // Built with umask 077, the release is still readable by a web server running as another
    // user; its slot image is sparse (the filesystem's unused blocks are holes).
    const dir2 = path.join(out2, r1.version);
    expect((await stat(dir2)).mode & 0o777).toBe(0o755);
    for (const n of await readdir(dir2))
      expect((await stat(path.join(dir2, n))).mode & 0o777).toBe(0o644);
    const rootfs = await stat(path.join(dir2, "rootfs.img"));
    expect(rootfs.blocks * 512).toBeLessThan(rootfs.size / 4);
    expect(stdout).toMatch(
      /^# 2026\.12\.05-001: [\d.]+ MiB of artifacts, [\d.]+ MiB on disk, on the wire /m,
    );
    const a = await readFile(path.join(r1.dir, "rootfs.img"));
    const b = await readFile(path.join(out2, r1.version, "rootfs.img"));
    expect(b.equals(a)).toBe(true);
    // What is in the slot's filesystem (read with debugfs, no mount, no root needed).
    const img = path.join(r1.dir, "rootfs.img");
    execFileSync("e2fsck", ["-fn", img], { stdio: "ignore" }); // throws on any error
    expect(debugfs(img, "stat /usr/bin/su")).toMatch(/Mode:\s+04755/);
    expect(debugfs(img, "stat /home/user/notes")).toMatch(/User:\s+1000\s+Group:\s+1000/);
    expect(debugfs(img, "stat /etc/shadow")).toMatch(/Mode:\s+0640[\s\S]*Group:\s+42/);
    expect(debugfs(img, "stat /usr/bin/dash")).toMatch(/Links: 2/);
    expect(debugfs(img, "ls /etc")).not.toContain("old.conf");
    expect(debugfs(img, "cat /etc/os-release")).toBe("ID=test\nVERSION_ID=2\n");
    expect(debugfs(img, "stat /boot/vmlinuz")).toContain(
      'Fast link dest: "../usr/lib/modules/6.12.9-test/vmlinuz"',
    );
    // Extended attributes byte for byte; symlinks pointing anywhere kept as they are.
    const caps = path.join(dir, "caps.bin");
    debugfs(img, `ea_get -f ${caps} /usr/bin/ping security.capability`);
    expect((await readFile(caps)).equals(PING_CAPS)).toBe(true);
    expect(debugfs(img, "ea_list /usr/bin/ping")).toContain('user.note (4) = "kept"');
    expect(debugfs(img, "stat /etc/resolv.conf")).toContain(
      'Fast link dest: "/run/systemd/resolve/stub-resolv.conf"',
    );
    expect(debugfs(img, "stat /etc/up")).toContain('Fast link dest: "../../../.."');
    // The mtime in the future was clamped to the image's created time.
    expect(debugfs(img, "stat /etc/os-release")).toContain(
      `mtime: 0x${(Date.parse("2026-11-01T00:00:00Z") / 1000).toString(16)}:00000000`,
    );
  });

  it("flags override the labels", async () => {
    const r = await buildReleaseFromImage({
      ref: `oci-archive:${archive}`,
      out: path.join(dir, "flags"),
      slotSizeBytes: 64 * MiB,
      version: "2026.12.05-009",
      notes: "from the flag",
    });
    expect(r.version).toBe("2026.12.05-009");
    expect(await readFile(path.join(r.dir, "notes.txt"), "utf8")).toBe("from the flag");
  });

  it("refuses an image that does not fit the slot, and leaves nothing in or beside the channel", async () => {
    const parent = path.join(dir, "refused");
    const out = path.join(parent, "channel");
    await expect(
      buildReleaseFromImage({ ref: `oci-archive:${archive}`, out, slotSizeBytes: 1 * MiB }),
    ).rejects.toMatchObject({
      code: "LIKEN_IMAGE_TOO_LARGE",
      message: expect.stringMatching(
        /^the image does not fit an ext4 filesystem of [\d.]+ MiB \(--slot-size, less the kernel and initrd placed after it\): its files need \d+ blocks/,
      ),
    });
    expect(await readdir(parent)).toEqual([]);
  });

  it("a refused layer leaves nothing in the channel either", async () => {
    const l = await writeLayout(path.join(dir, "bad"), [
      base,
      [{ name: "bin/evil", content: "x" }],
    ]);
    const parent = path.join(dir, "refused2");
    const out = path.join(parent, "channel");
    await expect(
      buildReleaseFromImage({ ref: l.dir, out, slotSizeBytes: 64 * MiB, version: "v1" }),
    ).rejects.toMatchObject({ code: "LIKEN_IMAGE_LAYER_ESCAPES" });
    expect(await readdir(parent)).toEqual([]);
  });
});
