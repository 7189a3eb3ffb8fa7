// Packs and index pages over real HTTP on loopback (docs/releases.md, "Packs and index
// pages"): slot a runs release 1.0 as liken staged it (its index pages kept), release 2.0
// changes a few blocks. The download fetches only the pages that differ and the changed
// chunks as zstd frames, each hashed after it is decoded. Every hostile case (a frame that
// does not decode or decodes to other bytes, a decompression bomb, an index page that does
// not match its hash) is refused, fetched again or routed to the plain artifact or index,
// with a log line naming the fault, and ends staged and verified, the running slot untouched.
import { beforeAll, describe, expect, it } from "vitest";
import { randomBytes } from "node:crypto";
import { cpSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { parse, stringify } from "yaml";
import { buildRelease } from "../../src/release/build.js";
import { verifyStagedSlot } from "../../src/slots/check.js";
import { keptPages, keptTop } from "../../src/slots/paged-index.js";
import { downloadRelease } from "../../src/slots/stage.js";
import { INDEX_CHUNK } from "../../src/verify/chunk-index.js";
import { digestOf } from "../../src/verify/digest.js";
import { PAGE_CHUNKS, paginate, TopIndex } from "../../src/verify/index-pages.js";
import { startFaultServer, type FaultServer } from "./fault-server.js";
import { downloadMachines } from "./download-fixtures.js";
import { bombFrame } from "../support/zstd-frames.js";

const MiB = 1024 * 1024;
const B = INDEX_CHUNK;
const root = mkdtempSync(path.join(tmpdir(), "liken-pack-"));
const channel = path.join(root, "channel");
// 1.0: 2048 blocks (8 pages), half text that compresses, half random. 2.0: blocks 10-12 new
// (text), so one page of eight differs.
const text = (n: number, seed: string): Buffer =>
  Buffer.from(
    `${seed} line of a config file that compresses well\n`.repeat(Math.ceil(n / 40)),
  ).subarray(0, n);
const v1 = Buffer.concat([text(1024 * B, "one"), randomBytes(1024 * B)]);
const v2 = Buffer.from(v1);
text(3 * B, "two").copy(v2, 10 * B);
const releases: Record<string, string> = {};
let server: FaultServer;

async function publish(version: string, rootfs: Buffer): Promise<string> {
  const file = path.join(root, `${version}.img`);
  writeFileSync(file, rootfs);
  const r = await buildRelease({ version, out: channel, artifacts: [{ name: "rootfs", file }] });
  return r.digest;
}

interface Doc {
  version: string;
  artifacts: Record<string, { path: string; size: number; digest: string }>[];
}

/** A copy of release 2.0 under another version, with one of its files changed by `spoil`. */
function spoiled(
  version: string,
  field: "pack" | "indexPages",
  spoil: (b: Buffer) => Buffer,
): string {
  const dir = path.join(channel, version);
  cpSync(path.join(channel, "2.0"), dir, { recursive: true });
  const doc = parse(readFileSync(path.join(dir, "release.yaml"), "utf8")) as Doc;
  doc.version = version;
  const ref = doc.artifacts[0]![field]!;
  const bytes = spoil(readFileSync(path.join(dir, ref.path)));
  writeFileSync(path.join(dir, ref.path), bytes);
  doc.artifacts[0]![field] = { ...ref, size: bytes.length, digest: digestOf(bytes) };
  const out = Buffer.from(stringify(doc, { lineWidth: 0 }));
  writeFileSync(path.join(dir, "release.yaml"), out);
  return digestOf(out);
}

function top2(): TopIndex {
  const pages = readFileSync(path.join(channel, "2.0", "2.0.img.lkpages")).length;
  return TopIndex.parse(
    readFileSync(path.join(channel, "2.0", "2.0.img.lktop")),
    v2.length,
    pages,
    "top",
  );
}

/** Where chunk 10's frame is in 2.0's pack (page 0: the frames before it). */
function frame10(version = "2.0"): { at: number; length: number } {
  const pages = readFileSync(path.join(channel, version, `${version}.img.lkpages`));
  let at = 0;
  for (let k = 0; k < 10; k++) at += pages.readUInt32BE(k * 40 + 4);
  return { at, length: pages.readUInt32BE(10 * 40 + 4) };
}

/** 2.0's pack with chunk 10's frame replaced by `frame` (the frames after it move). */
function withFrame10(frame: Buffer): (pack: Buffer) => Buffer {
  return (pack) => {
    const f = frame10();
    return Buffer.concat([pack.subarray(0, f.at), frame, pack.subarray(f.at + f.length)]);
  };
}

/** A copy of 2.0 whose chunk 10 is `frame` in the pack, with pages and top that say so. */
function withBomb(version: string, frame: Buffer): string {
  const dir = path.join(channel, version);
  const pagesOf2 = readFileSync(path.join(channel, "2.0", "2.0.img.lkpages"));
  const chunks = [];
  for (let at = 0; at < pagesOf2.length; at += 40) {
    chunks.push({
      length: pagesOf2.readUInt32BE(at),
      frame: pagesOf2.readUInt32BE(at + 4),
      hash: pagesOf2.subarray(at + 8, at + 40),
    });
  }
  chunks[10]!.frame = frame.length;
  const paged = paginate(v2.length, chunks);
  const digest = spoiled(version, "pack", withFrame10(frame));
  const doc = parse(readFileSync(path.join(dir, "release.yaml"), "utf8")) as Doc;
  for (const [field, bytes] of [
    ["indexTop", paged.top],
    ["indexPages", paged.pages],
  ] as const) {
    const ref = doc.artifacts[0]![field]!;
    writeFileSync(path.join(dir, ref.path), bytes);
    doc.artifacts[0]![field] = { ...ref, size: bytes.length, digest: digestOf(bytes) };
  }
  expect(digest).not.toBe("");
  const out = Buffer.from(stringify(doc, { lineWidth: 0 }));
  writeFileSync(path.join(dir, "release.yaml"), out);
  return digestOf(out);
}

beforeAll(async () => {
  releases["1.0"] = await publish("1.0", v1);
  releases["2.0"] = await publish("2.0", v2);
  server = await startFaultServer(channel);
});

const newMachine = downloadMachines(root, {
  server: () => server,
  request: () => ({
    version: "2.0",
    digest: releases["2.0"]!,
    fetch: { idleTimeoutMs: 2000 },
    attempts: 2,
  }),
});

/** Slot a runs 1.0 as liken staged it: release, index and index pages kept. */
async function machine() {
  const a = Buffer.alloc(16 * MiB);
  v1.copy(a);
  const m = newMachine({ a, b: 16 * MiB });
  const store = m.store;
  mkdirSync(store.dir("a"), { recursive: true });
  const rel = path.join(channel, "1.0");
  await store.writeRelease("a", readFileSync(path.join(rel, "release.yaml")));
  await store.keepIndex("a", "rootfs", readFileSync(path.join(rel, "1.0.img.lkidx")));
  await store.keepIndex("a", keptTop("rootfs"), readFileSync(path.join(rel, "1.0.img.lktop")));
  await store.keepIndex("a", keptPages("rootfs"), readFileSync(path.join(rel, "1.0.img.lkpages")));
  return m;
}

type Machine = Awaited<ReturnType<typeof machine>>;

async function expectStaged(m: Machine, version = "2.0"): Promise<void> {
  expect((await m.store.marker("b")).state).toBe("staged");
  expect(await verifyStagedSlot(m.config)).toMatchObject({ ok: true, version });
  expect(readFileSync(m.b).subarray(0, v2.length).equals(v2)).toBe(true);
}

const gets = (version: string, ext: string) =>
  server.log.filter((r) => r.path === `/${version}/2.0.img${ext}`);
const served = (version: string, ext: string) => gets(version, ext).length;

describe("packs and index pages", () => {
  it("fetches the changed page and the changed chunks as frames, nothing plain", async () => {
    const m = await machine();
    const r = await downloadRelease(m.req());
    await expectStaged(m);
    expect(top2().pages).toBe(2048 / PAGE_CHUNKS);
    // One page of eight, by Range; the plain index and artifact not at all.
    expect(gets("2.0", ".lkpages").map((g) => g.range)).toEqual([
      `bytes=0-${PAGE_CHUNKS * 40 - 1}`,
    ]);
    expect(served("2.0", ".lkidx") + served("2.0", "")).toBe(0);
    expect(served("2.0", ".lkpack")).toBe(1);
    const top = readFileSync(path.join(channel, "2.0", "2.0.img.lktop")).length;
    // Three text blocks compress far below their 12 KiB; the top and one page besides.
    expect(r.bytes!.fetched).toBeLessThan(top + PAGE_CHUNKS * 40 + 3 * B);
    expect(m.messages.join("\n")).toContain("index from 7 kept and 1 fetched page(s)");
    // The next download finds b's pages kept: 2.0's pages are kept with its index.
    expect(await m.store.keptIndex("b", keptPages("rootfs"))).toBeDefined();
  });

  it("refuses a frame that decodes to other bytes, fetches it again, and it matches", async () => {
    const m = await machine();
    const f = frame10();
    server.faults.set("/2.0/2.0.img.lkpack", { flip: { at: f.at + f.length - 2, times: 1 } });
    await downloadRelease(m.req());
    await expectStaged(m);
    expect(m.messages.join("\n")).toMatch(
      /pack frame of chunk 10 refused \(frame of chunk 10(: does not decode \(zstd: \w[^)]*\)| decodes to sha256:[0-9a-f]{64}, the index says sha256:[0-9a-f]{64})\); fetched again, it matched/,
    );
    expect(served("2.0", "")).toBe(0);
  });

  it.each([
    ["is not zstd", "flip-magic", /frame of chunk 10: is not a zstd frame/],
    ["does not decode", "flip-end", /frame of chunk 10: does not decode \(zstd: \w/],
    [
      "decodes to the wrong hash",
      "wrong-frame",
      /frame of chunk 10 decodes to sha256:[0-9a-f]{64}, the index says sha256:[0-9a-f]{64}/,
    ],
  ])("falls back to the plain artifact for a frame that %s twice", async (_n, how, fault) => {
    const m = await machine();
    const f = frame10();
    let version = "2.0";
    let digest = releases["2.0"]!;
    if (how === "wrong-frame") {
      // 1.0's chunk 10, a valid frame of the same length and other bytes.
      const other = frame10("1.0");
      expect(other.length).toBe(f.length);
      const bytes = readFileSync(path.join(channel, "1.0", "1.0.img.lkpack"));
      version = "wrong-frame";
      digest = spoiled(
        version,
        "pack",
        withFrame10(bytes.subarray(other.at, other.at + other.length)),
      );
    } else {
      const at = how === "flip-magic" ? f.at : f.at + f.length - 2;
      server.faults.set("/2.0/2.0.img.lkpack", { flip: { at, times: 2 } });
    }
    await downloadRelease(m.req({ version, digest }));
    await expectStaged(m, version);
    const line = m.messages.find((x) => /the pack is not used for the rest/.test(x)) ?? "";
    expect(line).toMatch(/pack frame of chunk 10 refused: .*; fetched again: /);
    expect(line).toMatch(fault);
    expect(line).toMatch(/chunks from 10 are fetched plain from http/);
    expect(served(version, ".lkpack")).toBe(2);
    expect(gets(version, "").every((g) => g.status === 206)).toBe(true);
    expect(served(version, "")).toBeGreaterThan(0);
  });

  it.each([
    [
      "declares more than its chunk",
      { declare: true },
      /declares 8388608 bytes, its chunk has 4096: cut, not decoded/,
    ],
    [
      "inflates past its chunk",
      { declare: false },
      /does not decode within its chunk's 4096 bytes \(zstd: output larger than the chunk\): cut at the length/,
    ],
  ])("cuts a decompression bomb that %s at the chunk's length", async (name, o, fault) => {
    const version = `bomb-${o.declare ? "declared" : "silent"}`;
    // A hostile build: its pages give the bomb's length, so the whole bomb is fetched.
    const digest = withBomb(version, bombFrame(8 * MiB, o.declare));
    const m = await machine();
    const before = process.memoryUsage().rss;
    await downloadRelease(m.req({ version, digest }));
    await expectStaged(m, version);
    expect(process.memoryUsage().rss - before).toBeLessThan(64 * MiB);
    const line = m.messages.find((x) => /the pack is not used for the rest/.test(x)) ?? "";
    expect(line, name).toMatch(fault);
  });

  it("refuses an index page that does not match its hash and fetches the plain index", async () => {
    // Page 0 changed after the top index was made (its digest in release.yaml updated).
    const digest = spoiled("bad-page", "indexPages", (p) => {
      const b = Buffer.from(p);
      b[100]! ^= 1;
      return b;
    });
    const m = await machine();
    await downloadRelease(m.req({ version: "bad-page", digest }));
    await expectStaged(m, "bad-page");
    expect(m.messages.join("\n")).toMatch(
      /index pages refused \(.*page 0 \(10240 bytes\) has sha256:[0-9a-f]{64}, the top index says sha256:[0-9a-f]{64}; refused\); the plain index 2\.0\.img\.lkidx is fetched and chunks travel plain/,
    );
    expect(served("bad-page", ".lkidx")).toBe(1);
    expect(served("bad-page", ".lkpack")).toBe(0);
  });

  it("with nothing in common, fetches a sample of the pages, then the artifact plain", async () => {
    const file = path.join(root, "new.img");
    writeFileSync(file, randomBytes(v2.length));
    const r = await buildRelease({
      version: "new",
      out: channel,
      artifacts: [{ name: "rootfs", file }],
    });
    const m = await machine();
    const got = await downloadRelease(m.req({ version: "new", digest: r.digest }));
    expect((await m.store.marker("b")).state).toBe("staged");
    expect(m.messages.join("\n")).toContain(
      "a sample of its index pages finds almost nothing of it locally; downloading in full",
    );
    // The sample is counted against the running slot's kept index, no map of the slot built
    // (its build and sort made the download of nothing reused slower than a full one).
    expect(m.messages.join("\n")).toMatch(
      /adaptive: 0 of a sample of 256 chunks in the running slot a's kept indexes \(\d+ ms, no map built\)/,
    );
    expect(m.messages.join("\n")).not.toMatch(/chunks of the running slot a known/);
    // Page 0 of eight (one in 32), not the other seven, nor the plain index.
    expect(server.log.filter((g) => g.path === "/new/new.img.lkpages").map((g) => g.range)).toEqual(
      [`bytes=0-${PAGE_CHUNKS * 40 - 1}`],
    );
    expect(server.log.some((g) => g.path === "/new/new.img.lkidx")).toBe(false);
    const top = readFileSync(path.join(channel, "new", "new.img.lktop")).length;
    expect(got.bytes!.fetched).toBe(v2.length + top + PAGE_CHUNKS * 40);
  });

  it("downloads a release built before packs as before", async () => {
    const file = path.join(root, "plain.img");
    writeFileSync(file, v2);
    const r = await buildRelease({
      version: "plain",
      out: channel,
      artifacts: [{ name: "rootfs", file }],
      pack: false,
    });
    const m = await machine();
    await downloadRelease(m.req({ version: "plain", digest: r.digest }));
    await expectStaged(m, "plain");
    const plain = server.log.filter((g) => g.path.startsWith("/plain/")).map((g) => g.path);
    expect(plain).toContain("/plain/plain.img.lkidx");
    expect(plain.some((p) => /lkpack|lktop|lkpages/.test(p))).toBe(false);
  });
});
