// Adaptive downloads over real HTTP on loopback: slot a runs release 1.0, release 2.0 differs
// by a few blocks (some changed, some moved, a tail added). The download copies what slot a
// holds, fetches the rest with few single-range requests, and every hostile case (a server
// that ignores, caps or mislabels ranges, sends wrong bytes, an index that lies, a corrupt
// running slot) is routed around with a log line naming the fault, ending staged and verified,
// the running slot untouched.
import { beforeAll, describe, expect, it } from "vitest";
import { createHash, randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { parse, stringify } from "yaml";
import { buildRelease } from "../../src/release/build.js";
import { verifyStagedSlot } from "../../src/slots/check.js";
import { downloadRelease } from "../../src/slots/stage.js";
import { encodeIndex, INDEX_CHUNK } from "../../src/verify/chunk-index.js";
import { digestOf } from "../../src/verify/digest.js";
import { startFaultServer, type FaultServer } from "./fault-server.js";
import { downloadMachines } from "./download-fixtures.js";

const KiB = 1024;
const MiB = 1024 * KiB;
const B = INDEX_CHUNK;
const root = mkdtempSync(path.join(tmpdir(), "liken-adaptive-"));
const channel = path.join(root, "channel");
// 1.0: 512 random blocks. 2.0: blocks 10-12 new, 300-309 a copy of 1.0's 100-109 (a file that
// moved), and a tail of one block and 123 bytes that 1.0 does not have.
const v1 = randomBytes(512 * B);
const v2 = Buffer.concat([v1, randomBytes(B + 123)]);
randomBytes(3 * B).copy(v2, 10 * B);
v1.copy(v2, 300 * B, 100 * B, 110 * B);
const NEW_BYTES = 3 * B + B + 123;
const releases: Record<string, string> = {};
let server: FaultServer;

async function publish(version: string, rootfs: Buffer): Promise<string> {
  const file = path.join(root, `${version}.img`);
  writeFileSync(file, rootfs);
  const r = await buildRelease({
    version,
    out: channel,
    chunkSize: 64 * KiB,
    artifacts: [{ name: "rootfs", file }],
    // Chunks travel plain here (releases built before packs); packs: pack-download.test.ts.
    pack: false,
  });
  return r.digest;
}

/** A copy of release 2.0 whose index is replaced by `index` (digest and size updated). */
function withIndex(version: string, index: Buffer): string {
  const dir = path.join(channel, version);
  mkdirSync(dir);
  const doc = parse(readFileSync(path.join(channel, "2.0", "release.yaml"), "utf8")) as {
    version: string;
    artifacts: { path: string; index: { path: string; size: number; digest: string } }[];
  };
  doc.version = version;
  writeFileSync(path.join(dir, "2.0.img"), v2);
  writeFileSync(path.join(dir, "2.0.img.lkidx"), index);
  doc.artifacts[0]!.index = { path: "2.0.img.lkidx", size: index.length, digest: digestOf(index) };
  const bytes = Buffer.from(stringify(doc, { lineWidth: 0 }));
  writeFileSync(path.join(dir, "release.yaml"), bytes);
  return digestOf(bytes);
}

function blocks(data: Buffer): { offset: number; length: number; hash: Buffer }[] {
  const out = [];
  for (let o = 0; o < data.length; o += B) {
    const piece = data.subarray(o, o + B);
    out.push({
      offset: o,
      length: piece.length,
      hash: createHash("sha256").update(piece).digest(),
    });
  }
  return out;
}

beforeAll(async () => {
  releases["1.0"] = await publish("1.0", v1);
  releases["2.0"] = await publish("2.0", v2);
  // An index that describes 1.0's bytes under 2.0's size: every chunk hash "lies".
  const lying = blocks(v2).map((c, i) => (i < 512 ? blocks(v1)[i]! : c));
  releases.lying = withIndex("lying", encodeIndex(v2.length, lying));
  server = await startFaultServer(channel);
});

const newMachine = downloadMachines(root, {
  server: () => server,
  request: () => ({
    version: "2.0",
    digest: releases["2.0"]!,
    fetch: { idleTimeoutMs: 400 },
    attempts: 2,
  }),
});

/** Slot a runs 1.0 (its bytes at offset 0, no release recorded unless `recorded`). */
async function machine(o: { corruptA?: number[]; recorded?: boolean } = {}) {
  const a = Buffer.alloc(4 * MiB);
  v1.copy(a);
  for (const blk of o.corruptA ?? []) a.fill(0xee, blk * B, blk * B + 100);
  const m = newMachine({ a, b: 4 * MiB });
  if (o.recorded) {
    mkdirSync(m.store.dir("a"), { recursive: true });
    await m.store.writeRelease("a", readFileSync(path.join(channel, "1.0", "release.yaml")));
    await m.store.keepIndex(
      "a",
      "rootfs",
      readFileSync(path.join(channel, "1.0", "1.0.img.lkidx")),
    );
  }
  return m;
}

type Machine = Awaited<ReturnType<typeof machine>>;

async function expectStaged(m: Machine, version = "2.0"): Promise<void> {
  expect((await m.store.marker("b")).state).toBe("staged");
  expect(await verifyStagedSlot(m.config)).toMatchObject({ ok: true, version });
  expect(readFileSync(m.b).subarray(0, v2.length).equals(v2)).toBe(true);
}

function artifactGets(version = "2.0"): { range: string | undefined; status: number }[] {
  return server.log.filter((r) => r.path === `/${version}/2.0.img`);
}

describe("adaptive downloads", () => {
  it.each([
    ["hashed from the running slot", false],
    ["from the index kept when 1.0 was staged", true],
  ])("fetches only what slot a lacks (%s)", async (_name, recorded) => {
    const m = await machine({ recorded });
    const r = await downloadRelease(m.req());
    await expectStaged(m);
    const index = readFileSync(path.join(channel, "2.0", "2.0.img.lkidx")).length;
    // New content, the index, and the merged gaps' 4 % at most.
    expect(r.bytes!.fetched).toBeLessThanOrEqual(Math.ceil(NEW_BYTES * 1.05) + index);
    expect(r.bytes!.reused).toBe(v2.length - NEW_BYTES);
    const gets = artifactGets();
    expect(gets.length).toBe(2); // blocks 10-12, and the tail
    expect(gets.every((g) => /^bytes=\d+-\d+$/.test(g.range ?? "") && g.status === 206)).toBe(true);
    expect(m.messages.join("\n")).toMatch(/adaptive plan from 0: \d+ of \d+ bytes local/);
  });

  it("keeps the index it computed of a running slot with no recorded release", async () => {
    const m = await machine();
    // Slot b once ran with no recorded release: its kept index goes when b is withdrawn.
    await m.store.keepIndex("b", "device", Buffer.from("of what b held"));
    await downloadRelease(m.req());
    expect(await m.store.keptIndex("b", "device")).toBeUndefined();
    expect(m.messages.join("\n")).toContain(
      "no release recorded: hashed from the device, index kept",
    );
    expect(await m.store.keptIndex("a", "device")).toBeDefined();
    // The next release (into b again, withdrawn first) reads the kept index, not slot a.
    m.messages.length = 0;
    await downloadRelease(m.req({ version: "lying", digest: releases.lying! }));
    expect(m.messages.join("\n")).toContain(
      "no release recorded: the device's index kept from an earlier download",
    );
  });

  it("resumes after a kill from its saved hash state", async () => {
    const m = await machine();
    // Blocks 0-9 are local, the first range (blocks 10-12) stalls until the stop, as a kill
    // stops it. The checkpoint taken as the local copy ended may lag what was written; the
    // catch-up one during the stall records it. The idle timeout is far off so that the stop,
    // not a fallback to a full download, ends the first run (CI's slow disk once let the
    // stall time out first).
    server.faults.set("/2.0/2.0.img", { stallFromRequest: 1 });
    const stop = new AbortController();
    const first = downloadRelease(
      m.req({ checkpointEvery: 16 * KiB, fetch: { idleTimeoutMs: 120_000, signal: stop.signal } }),
    );
    const deadline = Date.now() + 30_000;
    // A record at offset 0 (the artifact begun) is not yet a resume point: wait for one past it.
    while (((await m.store.progress("b", releases["2.0"]!)).artifacts.rootfs?.offset ?? 0) === 0) {
      if (Date.now() > deadline) throw new Error("no resume point within 30 s");
      await new Promise((r) => setTimeout(r, 20));
    }
    stop.abort();
    await expect(first).rejects.toThrow();
    const saved = (await m.store.progress("b", releases["2.0"]!)).artifacts.rootfs!;
    expect(saved.offset).toBeGreaterThan(0);
    expect(saved.hashState).toBeDefined();
    expect(m.messages.join("\n")).not.toContain("downloading the rest in full");
    server.reset();
    await downloadRelease(m.req());
    await expectStaged(m);
    expect(m.messages.join("\n")).toContain(`adaptive plan from ${saved.offset}:`);
  });

  it("fetches the blocks a corrupt running slot no longer holds", async () => {
    const m = await machine({ corruptA: [200, 201, 400] });
    const r = await downloadRelease(m.req());
    await expectStaged(m);
    // A corrupt block hashes to no chunk of 2.0: the plan fetches it, never copies it.
    expect(r.bytes!.reused).toBe(v2.length - NEW_BYTES - 3 * B);
  });

  it("fetches a chunk whose running-slot copy changed after it was recorded", async () => {
    // The kept index says block 200 holds 1.0's bytes; the disk no longer does.
    const m = await machine({ corruptA: [200], recorded: true });
    await downloadRelease(m.req());
    await expectStaged(m);
    expect(m.messages.join("\n")).toMatch(
      /1 chunk\(s\) from 819200 read from the running slot do not match the index/,
    );
  });
});

describe("servers and indexes adaptive downloads route around", () => {
  it.each([
    ["a server that ignores Range", { ignoreRange: true }, /the server ignored Range \(HTTP 200/],
    ["a CDN that caps ranges", { capRange: 4096 }, /the server caps ranges: asked bytes=/],
    [
      "a wrong Content-Range",
      { contentRange: "bytes 0-99/100" },
      /Content-Range "bytes 0-99\/100" to bytes=\d+-\d+ gives the artifact 100 bytes/,
    ],
    [
      "wrong bytes for a Range",
      { shiftRange: 4096 },
      /\(chunk 10\) .* have sha256:[0-9a-f]{64}, the index says .*the server sent wrong bytes/,
    ],
  ])("falls back to a full download for %s", async (_name, fault, reason) => {
    const m = await machine();
    server.faults.set("/2.0/2.0.img", fault);
    const r = await downloadRelease(m.req());
    await expectStaged(m);
    const line = m.messages.find((x) => /adaptive download stopped/.test(x)) ?? "";
    expect(line).toMatch(reason);
    expect(line).toMatch(/downloading the rest in full/);
    expect(r.bytes!.fetched).toBeGreaterThan(NEW_BYTES * 2);
  });

  it("refuses an index whose chunks lie and downloads in full from the start", async () => {
    const m = await machine();
    const r = await downloadRelease(m.req({ version: "lying", digest: releases.lying! }));
    await expectStaged(m, "lying");
    expect(m.messages.join("\n")).toMatch(
      /adaptive download refused \(the chunks the index names make sha256:[0-9a-f]+, release.yaml says sha256:[0-9a-f]+: the index lies about the artifact\)/,
    );
    expect(r.bytes!.fetched).toBeGreaterThanOrEqual(v2.length);
  });

  it.each([
    [
      "overlap",
      (c: ReturnType<typeof blocks>) => (c[5]!.offset -= 10),
      /chunk 5 starts at 20470, inside chunk 4/,
    ],
    [
      "a hole",
      (c: ReturnType<typeof blocks>) => (c[5]!.offset += 10),
      /chunk 5 starts at 20490, leaving bytes 20480-20489 in no chunk/,
    ],
    [
      "past the size",
      (c: ReturnType<typeof blocks>) => (c[c.length - 1]!.length += 1),
      /ends at 2101372, past the artifact's 2101371 bytes/,
    ],
  ])("downloads in full when the index has %s", async (name, spoil, message) => {
    const chunks = blocks(v2);
    spoil(chunks);
    const version = `bad-${name.replace(/ /g, "-")}`;
    const digest = withIndex(version, encodeIndex(v2.length, chunks));
    const m = await machine();
    const r = await downloadRelease(m.req({ version, digest }));
    await expectStaged(m, version);
    const line = m.messages.find((x) => /index 2\.0\.img\.lkidx/.test(x)) ?? "";
    expect(line).toMatch(message);
    expect(line).toMatch(
      /the index does not describe the artifact, so it is not used; downloading in full/,
    );
    expect(r.bytes!.reused).toBe(0);
  });
});
