// The first update of an installed machine (issue 50): a disk image made by `liken machine
// image`, its slot a and its state partition (read back with debugfs) made the two file slots
// and the state folder of a download machine, then release 2.0 downloaded over real HTTP.
// The installer kept release 1.0's chunk index for slot a, so the download learns what slot a
// holds without reading it; where the index is missing or not the release's, slot a is indexed
// once by a pass that is kept, resumes after an interruption, and says when the slot's bytes
// differ from its release.
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import {
  appendFileSync,
  closeSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  readSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { installMachine } from "../../src/install/install.js";
import { MiB } from "../../src/install/layout.js";
import { buildRelease } from "../../src/release/build.js";
import type { IndexingProgress } from "../../src/slots/seed-context.js";
import { downloadRelease } from "../../src/slots/stage.js";
import { INDEX_CHUNK } from "../../src/verify/chunk-index.js";
import { digestOf } from "../../src/verify/digest.js";
import { parseRelease, type Release } from "../../src/verify/release.js";
import { downloadMachines, type DownloadMachine } from "./download-fixtures.js";
import { startFaultServer, type FaultServer } from "./fault-server.js";

const B = INDEX_CHUNK;
const SLOT_MIB = 8;
const root = mkdtempSync(path.join(tmpdir(), "liken-first-update-"));
const channel = path.join(root, "channel");
// 1.0: 1024 random blocks (4 MiB). 2.0 and 3.0: a few blocks new, so that almost all is reused.
const v1 = randomBytes(1024 * B);
const v2 = Buffer.from(v1);
randomBytes(4 * B).copy(v2, 10 * B);
const v3 = Buffer.from(v1);
randomBytes(4 * B).copy(v3, 500 * B);
const releases: Record<string, { digest: string; release: Release }> = {};
let server: FaultServer;
/** Slot a and state of the machine installed from 1.0 (read back from its disk image). */
let installed: { slotA: Buffer; state: string; log: string[] };

async function publish(version: string, rootfs: Buffer): Promise<void> {
  const file = path.join(root, `${version}.img`);
  writeFileSync(file, rootfs);
  const r = await buildRelease({ version, out: channel, artifacts: [{ name: "rootfs", file }] });
  releases[version] = { digest: r.digest, release: r.release };
}

function bytesAt(f: string, offset: number, size: number): Buffer {
  const fd = openSync(f, "r");
  try {
    const b = Buffer.alloc(size);
    readSync(fd, b, 0, size, offset);
    return b;
  } finally {
    closeSync(fd);
  }
}

/** `liken machine image` of release 1.0; slot a's bytes and the state partition's slot-a/. */
async function install(): Promise<typeof installed> {
  const img = path.join(root, "disk.img");
  const log: string[] = [];
  const r = await installMachine({
    target: img,
    mode: "image",
    espMiB: 32,
    slotMiB: SLOT_MIB,
    stateMiB: 64,
    bootloader: "grub",
    release: { dir: path.join(channel, "1.0") },
    cluster: "lab",
    credential: { kind: "kubeconfig", kubeconfig: "apiVersion: v1\nkind: Config\n" },
    kernelArgs: "root=PARTLABEL=liken-%s rw",
    trialArgs: "panic=10",
    serial: false,
    wipe: false,
    log: (l) => log.push(l),
  });
  const a = r.layout["liken-a"];
  const state = path.join(root, "installed-state");
  mkdirSync(state);
  execFileSync(
    "debugfs",
    ["-R", `rdump /slot-a ${state}`, `${img}?offset=${r.layout["liken-state"].offset}`],
    {
      stdio: "ignore",
    },
  );
  const slotA = bytesAt(img, a.offset, a.size);
  rmSync(img);
  return { slotA, state, log };
}

beforeAll(async () => {
  await publish("1.0", v1);
  await publish("2.0", v2);
  await publish("3.0", v3);
  server = await startFaultServer(channel);
  installed = await install();
});

const newMachine = downloadMachines(root, {
  server: () => server,
  request: () => ({
    version: "2.0",
    digest: releases["2.0"]!.digest,
    fetch: { idleTimeoutMs: 2000 },
    attempts: 2,
  }),
});

/** A machine as the installer left it: slot a as written, slot-a/ of the state partition. */
function installedMachine(slotA = installed.slotA): DownloadMachine {
  const m = newMachine({ a: slotA, b: SLOT_MIB * MiB });
  mkdirSync(m.config.stateDir, { recursive: true });
  execFileSync("cp", ["-a", path.join(installed.state, "slot-a"), m.store.dir("a")]);
  return m;
}

const indexOf = (version: string): Buffer => {
  const a = releases[version]!.release.artifacts[0]!;
  return readFileSync(path.join(channel, version, a.index!.path));
};
const keptFile = (m: DownloadMachine): string => m.store.keptIndexFile("a", "rootfs");
const passFiles = (m: DownloadMachine): string[] =>
  existsSync(path.join(m.store.dir("a"), "index"))
    ? readdirSync(path.join(m.store.dir("a"), "index")).filter((f) => f.includes(".pass"))
    : [];

async function expectStaged(m: DownloadMachine, version: string, bytes: Buffer): Promise<void> {
  expect((await m.store.marker("b")).state).toBe("staged");
  expect(parseRelease((await m.store.release("b"))!).version).toBe(version);
  expect(readFileSync(m.b).subarray(0, bytes.length).equals(bytes)).toBe(true);
}

describe("the first update of an installed machine", () => {
  it("learns what slot a holds from the kept index, reading none of it, and fetches only the change", async () => {
    const m = installedMachine();
    const seen: IndexingProgress[] = [];
    const r = await downloadRelease(m.req({ onIndexing: (i) => void seen.push(i) }));
    await expectStaged(m, "2.0", v2);
    const log = m.messages.join("\n");
    expect(log).toMatch(
      /chunks of the running slot a known in \d+ ms \(release 1\.0, its kept indexes\)/,
    );
    expect(log).not.toMatch(/indexing rootfs/);
    expect(seen).toEqual([]);
    expect(passFiles(m)).toEqual([]);
    const pages = /index from (\d+) kept and (\d+) fetched page\(s\)/.exec(log);
    expect(Number(pages?.[1])).toBeGreaterThan(0);
    // The new blocks and the index pages, and little else (issue 50: at most 1.1 x).
    expect(r.bytes!.reused).toBeGreaterThanOrEqual(v1.length - 4 * B);
    expect(r.bytes!.fetched).toBeLessThanOrEqual(1.1 * 4 * B + indexOf("2.0").length);
  });

  it("indexes slot a once when no index was kept, keeps it, and the next download reads none of it", async () => {
    const m = installedMachine();
    rmSync(keptFile(m), { force: true });
    const seen: IndexingProgress[] = [];
    await downloadRelease(m.req({ onIndexing: (i) => void seen.push(i) }));
    await expectStaged(m, "2.0", v2);
    expect(m.messages.join("\n")).toMatch(
      /running slot a: no index of rootfs was kept; indexing rootfs \(4194304 bytes\) once/,
    );
    expect(m.messages.join("\n")).toMatch(/rootfs indexed \(4194304 bytes read\)/);
    expect(seen.at(-1)).toMatchObject({ slot: "a", done: v1.length, total: v1.length });
    expect(readFileSync(keptFile(m)).equals(indexOf("1.0"))).toBe(true);
    expect(passFiles(m)).toEqual([]);

    m.messages.length = 0;
    await downloadRelease(m.req({ version: "3.0", digest: releases["3.0"]!.digest }));
    await expectStaged(m, "3.0", v3);
    expect(m.messages.join("\n")).toMatch(/\(release 1\.0, its kept indexes\)/);
    expect(m.messages.join("\n")).not.toMatch(/indexing rootfs/);
  });

  it("resumes an interrupted index pass where it stopped, past a torn tail", async () => {
    const m = installedMachine();
    rmSync(keptFile(m), { force: true });
    const every = 1 * MiB;
    const first: number[] = [];
    const stop = m.req({
      checkpointEvery: every,
      onIndexing: (i) => {
        first.push(i.done);
        // A kill after the second checkpoint (the agent stopping the child, a power cut).
        if (i.done < 2 * every) return;
        const killed = new Error("killed");
        killed.name = "AbortError";
        throw killed;
      },
    });
    await expect(downloadRelease(stop)).rejects.toThrow(/killed/);
    expect(first).toEqual([0, every, 2 * every]);
    const rec = JSON.parse(
      readFileSync(path.join(m.store.dir("a"), "index", "rootfs.pass.json"), "utf8"),
    ) as { chunks: number };
    expect(rec.chunks).toBe((2 * every) / B);
    // Entries written after the last record (a crash between the two) are cut off.
    appendFileSync(path.join(m.store.dir("a"), "index", "rootfs.pass"), randomBytes(100));
    // The agent's status reads the stage from the progress file meanwhile.
    expect((await m.store.progress("b", releases["2.0"]!.digest)).indexing).toMatchObject({
      done: 2 * every,
      total: v1.length,
    });

    m.messages.length = 0;
    const second: number[] = [];
    await downloadRelease(
      m.req({ checkpointEvery: every, onIndexing: (i) => void second.push(i.done) }),
    );
    await expectStaged(m, "2.0", v2);
    const log = m.messages.join("\n");
    expect(log).toMatch(/rootfs's index pass resumed at byte 2097152 of 4194304/);
    expect(log).toMatch(/rootfs indexed \(2097152 bytes read\)/);
    expect(second).toEqual([2 * every, 3 * every, 4 * every, 4 * every]);
    expect(readFileSync(keptFile(m)).equals(indexOf("1.0"))).toBe(true);
  });

  it("resumes the pass over a slot installed by other means (no release recorded)", async () => {
    const m = newMachine({ a: installed.slotA, b: SLOT_MIB * MiB });
    const every = 2 * MiB;
    const abort = (i: IndexingProgress): void => {
      if (i.done < every) return;
      const killed = new Error("killed");
      killed.name = "AbortError";
      throw killed;
    };
    await expect(
      downloadRelease(m.req({ checkpointEvery: every, onIndexing: abort })),
    ).rejects.toThrow(/killed/);
    m.messages.length = 0;
    await downloadRelease(m.req({ checkpointEvery: every }));
    await expectStaged(m, "2.0", v2);
    // 2.0 spans 4 MiB of the slot: the pass went on from 2 MiB.
    expect(m.messages.join("\n")).toMatch(
      /no release recorded: hashed from the device, resumed at byte 2097152, index kept/,
    );
    expect(passFiles(m)).toEqual([]);
  });

  it("indexes slot a again when its kept index is not the release's, and says so", async () => {
    const m = installedMachine();
    writeFileSync(keptFile(m), Buffer.concat([indexOf("1.0"), Buffer.from("x")]));
    const seen: IndexingProgress[] = [];
    await downloadRelease(m.req({ onIndexing: (i) => void seen.push(i) }));
    await expectStaged(m, "2.0", v2);
    expect(seen.at(-1)?.note).toMatch(
      /^slot a: the index kept for rootfs has digest sha256:[0-9a-f]{64}, release\.yaml says sha256:[0-9a-f]{64}; the slot is indexed again$/,
    );
    expect(readFileSync(keptFile(m)).equals(indexOf("1.0"))).toBe(true);
  });

  it("says when slot a's bytes differ from its release, and does not read it again", async () => {
    // Block 700 of slot a changed after the install (a disk that rots, a write by hand).
    const changed = Buffer.from(installed.slotA);
    changed.fill(0xee, 700 * B, 700 * B + 100);
    const m = installedMachine(changed);
    rmSync(keptFile(m), { force: true });
    const seen: IndexingProgress[] = [];
    await downloadRelease(m.req({ onIndexing: (i) => void seen.push(i) }));
    await expectStaged(m, "2.0", v2);
    const note = seen.at(-1)?.note ?? "";
    expect(note).toMatch(
      /slot a's rootfs does not hold release 1\.0's bytes: indexed from the slot, its index has digest sha256:[0-9a-f]{64}, release\.yaml says sha256:[0-9a-f]{64} \(the slot changed or is corrupt\)/,
    );
    expect(m.messages.join("\n")).toContain(`warning: ${note}`);
    // Not kept as the release's index; kept as the slot's own, so the pass is not repeated.
    expect(existsSync(keptFile(m))).toBe(false);

    m.messages.length = 0;
    const again: IndexingProgress[] = [];
    await downloadRelease(
      m.req({
        version: "3.0",
        digest: releases["3.0"]!.digest,
        onIndexing: (i) => void again.push(i),
      }),
    );
    await expectStaged(m, "3.0", v3);
    expect(m.messages.join("\n")).toMatch(
      /rootfs was indexed by an earlier download; not read again/,
    );
    expect(m.messages.join("\n")).toMatch(/rootfs indexed \(0 bytes read\)/);
    expect(again.at(-1)?.note).toBe(note);
  });
});

// After the machines: the fixtures check the last machine's slot a after each test.
describe("the installer keeps the installed release's chunk index", () => {
  it("writes slot-a/index/rootfs.lkidx on the state partition, the release's own bytes", () => {
    const a = releases["1.0"]!.release.artifacts[0]!;
    const kept = readFileSync(path.join(installed.state, "slot-a", "index", "rootfs.lkidx"));
    expect(digestOf(kept)).toBe(a.index!.digest);
    expect(kept.equals(indexOf("1.0"))).toBe(true);
    // The top index and the pages too: pages 2.0 shares with 1.0 are not fetched again.
    for (const [ref, name] of [
      [a.indexTop!, "rootfs.top"],
      [a.indexPages!, "rootfs.pages"],
    ] as const) {
      const b = readFileSync(path.join(installed.state, "slot-a", "index", `${name}.lkidx`));
      expect(digestOf(b), name).toBe(ref.digest);
    }
  });

  it("refuses a release whose index is not the one release.yaml names, before writing", async () => {
    const bad = path.join(root, "bad-1.0");
    execFileSync("cp", ["-a", path.join(channel, "1.0"), bad]);
    const a = releases["1.0"]!.release.artifacts[0]!;
    appendFileSync(path.join(bad, a.index!.path), "x");
    const img = path.join(root, "bad.img");
    const err = await installMachine({
      target: img,
      mode: "image",
      espMiB: 32,
      slotMiB: SLOT_MIB,
      stateMiB: 64,
      bootloader: "grub",
      release: { dir: bad },
      cluster: "lab",
      credential: { kind: "kubeconfig", kubeconfig: "k" },
      kernelArgs: "root=PARTLABEL=liken-%s rw",
      trialArgs: "",
      serial: false,
      wipe: false,
      log: () => {},
    }).catch((e: unknown) => e as Error & { code: string });
    expect(err).toMatchObject({ code: "LIKEN_INSTALL_VERIFY_FAILED" });
    expect((err as Error).message).toMatch(
      /the chunk index of rootfs \(.*\) has digest sha256:[0-9a-f]{64}, release 1\.0 says sha256:[0-9a-f]{64}; nothing was written/,
    );
    expect(existsSync(img)).toBe(false);
  });
});
