// Bad input over real HTTP on loopback: each case ends with a clear error, nothing staged,
// and the running slot untouched; the recoverable ones (a drop, a server ignoring Range, a
// bit flipped once) end staged and verified.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { stringify } from "yaml";
import { LikenError } from "../../src/errors.js";
import { buildRelease } from "../../src/release/build.js";
import { downloadRelease } from "../../src/slots/stage.js";
import { verifyStagedSlot } from "../../src/slots/check.js";
import { digestOf } from "../../src/verify/digest.js";
import { startFaultServer, type FaultServer } from "./fault-server.js";
import { loopAvailable, withLoopDevice } from "./loop.js";
import { downloadMachines, type DownloadMachine } from "./download-fixtures.js";

const KiB = 1024;
const MiB = 1024 * KiB;
const root = mkdtempSync(path.join(tmpdir(), "liken-faults-"));
const channel = path.join(root, "channel");
const boot = randomBytes(5000);
const rootfs = randomBytes(MiB + 123);
const ROOTFS_AT = 8192; // where buildRelease places rootfs: after boot, 4096-aligned
const releases: Record<string, string> = {};
let server: FaultServer;
let other: FaultServer;

beforeAll(async () => {
  writeFileSync(path.join(root, "boot.img"), boot);
  writeFileSync(path.join(root, "rootfs.img"), rootfs);
  const artifacts = [
    { name: "boot", file: path.join(root, "boot.img") },
    { name: "rootfs", file: path.join(root, "rootfs.img") },
  ];
  for (const v of ["1.0", "2.0"]) {
    releases[v] = (
      await buildRelease({ version: v, out: channel, chunkSize: 64 * KiB, artifacts })
    ).digest;
  }
  server = await startFaultServer(channel);
  other = await startFaultServer(channel);
});
afterAll(async () => {
  await other.close();
});

const newMachine = downloadMachines(root, {
  server: () => server,
  request: () => ({
    version: "1.0",
    digest: releases["1.0"]!,
    fetch: { idleTimeoutMs: 400 },
    attempts: 3,
  }),
});
/** A fresh machine: slot a runs (filled with a pattern), slot b is the target. */
const machine = (bSize = 2 * MiB): DownloadMachine =>
  newMachine({ a: Buffer.alloc(2 * MiB, 0x5a), b: bSize });

async function refused(p: Promise<unknown>): Promise<LikenError> {
  try {
    await p;
  } catch (e) {
    expect(e).toBeInstanceOf(LikenError);
    return e as LikenError;
  }
  throw new Error("expected the download to fail");
}

async function expectNotStaged(m: DownloadMachine): Promise<void> {
  expect((await m.store.marker("b")).state).not.toBe("staged");
}

describe("downloads that must fail cleanly", () => {
  it.each([
    [
      "a bit flipped in a chunk, every time",
      "/1.0/rootfs.img",
      { flip: { at: 300_000, times: 99 } },
      "LIKEN_NATIVE_CHUNK_MISMATCH",
      /chunk 4 has digest/,
    ],
    [
      "a bit flipped in a small artifact, every time",
      "/1.0/boot.img",
      { flip: { at: 17, times: 99 } },
      "LIKEN_VERIFY_ARTIFACT_MISMATCH",
      /artifact boot: received bytes have digest/,
    ],
    [
      "a truncated artifact",
      "/1.0/rootfs.img",
      { truncateTo: 700_000 },
      "LIKEN_VERIFY_SIZE_MISMATCH",
      /declares 700000 bytes .* truncated/,
    ],
    [
      "endless data",
      "/1.0/rootfs.img",
      { endless: true },
      "LIKEN_VERIFY_BEYOND_SIZE",
      /more than the declared size 1048699/,
    ],
    [
      "a stall past the idle timeout",
      "/1.0/rootfs.img",
      { stallAfter: 200_000 },
      "LIKEN_VERIFY_STALLED",
      /no bytes for 400 ms/,
    ],
    [
      "404",
      "/1.0/rootfs.img",
      { status: 404 },
      "LIKEN_VERIFY_HTTP_STATUS",
      /HTTP 404; check the source URL/,
    ],
    [
      "500",
      "/1.0/release.yaml",
      { status: 500 },
      "LIKEN_VERIFY_HTTP_STATUS",
      /HTTP 500; the server failed/,
    ],
  ] as const)("%s", async (_name, file, fault, code, message) => {
    const m = machine();
    server.faults.set(file, fault);
    const e = await refused(downloadRelease(m.req()));
    expect(e.code).toBe(code);
    expect(e.message).toMatch(message);
    await expectNotStaged(m);
  });

  it("never writes a chunk that fails its digest", async () => {
    const m = machine();
    server.faults.set("/1.0/rootfs.img", { flip: { at: 300_000, times: 99 } });
    await refused(downloadRelease(m.req()));
    const b = readFileSync(m.b);
    // chunks 0-3 landed; chunk 4 (bytes 262144..327679, holding the flip) never did
    expect(b.subarray(ROOTFS_AT, ROOTFS_AT + 4 * 65536).equals(rootfs.subarray(0, 4 * 65536))).toBe(
      true,
    );
    expect(b.subarray(ROOTFS_AT + 4 * 65536, ROOTFS_AT + 5 * 65536).every((x) => x === 0)).toBe(
      true,
    );
  });

  it("refuses a release.yaml whose digest differs from the catalog", async () => {
    const m = machine();
    const e = await refused(downloadRelease(m.req({ digest: releases["2.0"]! })));
    expect(e.code).toBe("LIKEN_VERIFY_DIGEST_MISMATCH");
    expect(server.log.map((r) => r.path)).toEqual(["/1.0/release.yaml"]); // no artifact fetched
    await expectNotStaged(m);
  });

  it("refuses another release's document offered under this version (mix and match)", async () => {
    const m = machine();
    // The catalog pairs version 2.0 with the digest of 1.0's release.yaml, and the server
    // serves that document at 2.0's address.
    server.faults.set("/2.0/release.yaml", { redirect: "/1.0/release.yaml" });
    const e = await refused(downloadRelease(m.req({ version: "2.0", digest: releases["1.0"]! })));
    expect(e.code).toBe("LIKEN_VERIFY_VERSION_MISMATCH");
    await expectNotStaged(m);
  });

  it.each([
    ["an artifact of another release", "../1.0/rootfs.img", /leaves the release directory/],
    ["an absolute URL", `http://127.0.0.1:1/evil.img`, /absolute path or URL/],
    ["an absolute path", "/etc/passwd", /absolute path or URL/],
  ])("refuses a release.yaml naming %s", async (_name, bad, message) => {
    const m = machine();
    const v = `evil-${m.n}`;
    const doc = Buffer.from(
      stringify({
        apiVersion: "liken.sh/v1alpha1",
        kind: "Release",
        version: v,
        artifacts: [{ name: "rootfs", path: bad, size: rootfs.length, digest: digestOf(rootfs) }],
      }),
    );
    mkdirSync(path.join(channel, v));
    writeFileSync(path.join(channel, v, "release.yaml"), doc);
    const e = await refused(downloadRelease(m.req({ version: v, digest: digestOf(doc) })));
    expect(e.code).toBe("LIKEN_VERIFY_PATH_UNSAFE");
    expect(e.message).toMatch(message);
    expect(server.log).toHaveLength(1);
    await expectNotStaged(m);
  });

  it("refuses a redirect to another origin", async () => {
    const m = machine();
    server.faults.set("/1.0/rootfs.img", { redirect: `${other.url}/1.0/rootfs.img` });
    const e = await refused(downloadRelease(m.req()));
    expect(e.code).toBe("LIKEN_VERIFY_REDIRECT_REFUSED");
    expect(e.message).toMatch(/only within http:\/\/127\.0\.0\.1:\d+/);
    expect(other.log).toHaveLength(0);
    await expectNotStaged(m);
  });

  it.each([
    ["a huge release.yaml", () => Buffer.alloc(2 * MiB, 0x23), "LIKEN_VERIFY_DOCUMENT_TOO_LARGE"],
    [
      "a release.yaml of aliases",
      () =>
        Buffer.from(
          `a: &a [x, x, x, x]\nb: &b [*a, *a, *a, *a]\nc: &c [*b, *b, *b, *b]\nd: [*c, *c, *c, *c]\n`,
        ),
      "LIKEN_VERIFY_DOCUMENT_INVALID",
    ],
  ])("refuses %s even when the catalog digest matches", async (_name, make, code) => {
    const m = machine();
    const v = `hostile-${m.n}`;
    const doc = make();
    mkdirSync(path.join(channel, v));
    writeFileSync(path.join(channel, v, "release.yaml"), doc);
    const e = await refused(downloadRelease(m.req({ version: v, digest: digestOf(doc) })));
    expect(e.code).toBe(code);
    await expectNotStaged(m);
  });

  it("refuses a slot device smaller than the artifacts before writing anything", async () => {
    const m = machine(512 * KiB);
    const e = await refused(downloadRelease(m.req()));
    expect(e.code).toBe("LIKEN_SLOT_TOO_SMALL");
    expect(e.message).toMatch(
      /artifact rootfs \(1048699 bytes at offset 8192\) needs 1056891 bytes of slot b, but .*b\.img holds 524288 bytes/,
    );
    expect((await m.store.marker("b")).state).toBe("empty");
    // Not a byte written (a file-backed slot would have grown) and not a byte fetched.
    expect(readFileSync(m.b).equals(Buffer.alloc(512 * KiB))).toBe(true);
    expect(server.log.filter((r) => r.path.endsWith(".img"))).toEqual([]);
  });

  it.skipIf(!loopAvailable)(
    "refuses a release larger than a block-device slot, leaving the partition as it was",
    async () => {
      // A loop device has the fixed size of a partition, read through BLKGETSIZE64.
      const m = machine();
      const backing = path.join(path.dirname(m.b), "b-partition.img");
      writeFileSync(backing, Buffer.alloc(768 * KiB, 0xa5));
      await withLoopDevice(backing, async (loop) => {
        const config = { ...m.config, slots: { ...m.config.slots, b: { device: loop } } };
        const e = await refused(downloadRelease(m.req({ config })));
        expect(e.code).toBe("LIKEN_SLOT_TOO_SMALL");
        expect(e.message).toContain(
          `needs 1056891 bytes of slot b, but ${loop} holds 786432 bytes`,
        );
        expect(e.message).toContain("nothing was written");
        expect(e.context).toMatchObject({ device: loop, need: 1056891, size: 786432 });
        expect(readFileSync(loop).equals(Buffer.alloc(768 * KiB, 0xa5))).toBe(true);
        expect(server.log.filter((r) => r.path.endsWith(".img"))).toEqual([]);
        expect((await m.store.marker("b")).state).toBe("empty");
      });
    },
  );
});

describe("downloads that recover", () => {
  async function expectStagedAndVerified(m: DownloadMachine): Promise<void> {
    expect((await m.store.marker("b")).state).toBe("staged");
    const v = await verifyStagedSlot(m.config);
    expect(v).toMatchObject({ ok: true, version: "1.0" });
    const b = readFileSync(m.b);
    expect(b.subarray(ROOTFS_AT, ROOTFS_AT + rootfs.length).equals(rootfs)).toBe(true);
  }

  it("resumes with Range after the connection drops halfway", async () => {
    const m = machine();
    server.faults.set("/1.0/rootfs.img", { drop: { after: 500_000, times: 2 } });
    await downloadRelease(m.req());
    await expectStagedAndVerified(m);
    const gets = server.log.filter((r) => r.path === "/1.0/rootfs.img");
    expect(gets).toHaveLength(3);
    expect(gets[1]!.range).toMatch(/^bytes=\d+-$/);
    expect(gets[1]!.status).toBe(206);
  });

  it("detects a server that ignores Range (200, not 206) and still writes the right bytes", async () => {
    const m = machine();
    server.faults.set("/1.0/rootfs.img", { drop: { after: 500_000, times: 1 }, ignoreRange: true });
    await downloadRelease(m.req());
    await expectStagedAndVerified(m);
    const gets = server.log.filter((r) => r.path === "/1.0/rootfs.img");
    expect(gets.map((g) => [g.range !== undefined, g.status])).toEqual([
      [false, 200],
      [true, 200],
    ]);
  });

  it("fetches a chunk again when its digest fails once", async () => {
    const m = machine();
    server.faults.set("/1.0/rootfs.img", { flip: { at: 700_000, times: 1 } });
    await downloadRelease(m.req());
    await expectStagedAndVerified(m);
    const gets = server.log.filter((r) => r.path === "/1.0/rootfs.img");
    expect(gets[1]!.range).toBe(`bytes=${10 * 65536}-`); // chunk 10 holds byte 700000
    expect(m.messages.some((x) => /chunk 10 has digest/.test(x))).toBe(true);
  });

  it("follows a redirect within the same origin", async () => {
    const m = machine();
    server.faults.set("/1.0/boot.img", { redirect: "/2.0/boot.img" });
    await downloadRelease(m.req());
    await expectStagedAndVerified(m);
  });

  it("withdraws a staged release before writing another, and a damaged slot fails verify", async () => {
    const m = machine();
    await downloadRelease(m.req());
    expect((await downloadRelease(m.req())).outcome).toBe("already-staged");
    const b = readFileSync(m.b);
    b[ROOTFS_AT + 1000]! ^= 0x80;
    writeFileSync(m.b, b);
    const v = await verifyStagedSlot(m.config);
    expect(v.ok).toBe(false);
    expect(v.problems.join()).toMatch(/artifact rootfs reads back as sha256:/);
    expect((await m.store.marker("b")).state).toBe("withdrawn");
  });
});
