import { afterAll, describe, expect, it } from "vitest";
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { discard, fsyncPath, sdNotify } from "../../src/native/index.js";

const dir = mkdtempSync(path.join(tmpdir(), "liken-io-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A real AF_UNIX datagram receiver (Node has none): python prints the first datagram. */
function receiver(address: string): { ready: Promise<void>; message: Promise<string> } {
  const py = spawn("python3", [
    "-c",
    [
      "import socket,sys",
      "s=socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)",
      "a=sys.argv[1]",
      "s.bind('\\0'+a[1:] if a.startswith('@') else a)",
      "print('ready', flush=True)",
      "print(s.recv(4096).decode(), flush=True)",
    ].join("\n"),
    address,
  ]);
  let out = "";
  let onReady: () => void = () => {};
  const ready = new Promise<void>((r) => (onReady = r));
  py.stdout.on("data", (d: Buffer) => {
    out += d.toString();
    if (out.startsWith("ready\n")) onReady();
  });
  const message = new Promise<string>((resolve, reject) => {
    py.on("error", reject);
    py.on("exit", () => resolve(out.replace(/^ready\n/, "").trim()));
  });
  return { ready, message };
}

describe("sdNotify", () => {
  it("says false when systemd gave no socket", () => {
    delete process.env.NOTIFY_SOCKET;
    expect(sdNotify("READY=1")).toBe(false);
  });

  it.each([
    ["a path", () => path.join(dir, "notify.sock")],
    ["the abstract namespace", () => `@liken-test-${process.pid}`],
  ])("sends one datagram to a socket in %s", async (_what, address) => {
    const r = receiver(address());
    await r.ready;
    process.env.NOTIFY_SOCKET = address();
    try {
      expect(sdNotify("READY=1\nSTATUS=staged")).toBe(true);
    } finally {
      delete process.env.NOTIFY_SOCKET;
    }
    expect(await r.message).toBe("READY=1\nSTATUS=staged");
  });

  it("fails with the errno when nobody listens", () => {
    process.env.NOTIFY_SOCKET = path.join(dir, "nobody.sock");
    try {
      expect(() => sdNotify("READY=1")).toThrowError(/ENOENT|No such file/);
    } finally {
      delete process.env.NOTIFY_SOCKET;
    }
  });
});

describe("discard and fsyncPath", () => {
  it("punches a hole in a file-backed slot: the range reads as zeros, the rest stays", () => {
    const f = path.join(dir, "slot.img");
    writeFileSync(f, Buffer.alloc(3 * 65536, 0xab));
    discard(f, 65536, 65536);
    const b = readFileSync(f);
    expect(statSync(f).size).toBe(3 * 65536);
    expect(b.subarray(65536, 131072).every((x) => x === 0)).toBe(true);
    expect(b.subarray(0, 65536).every((x) => x === 0xab)).toBe(true);
    expect(b.subarray(131072).every((x) => x === 0xab)).toBe(true);
    expect(() => discard(f, 100, 4096)).toThrowError(/multiple of 4096/);
  });

  it("syncs a file and a directory, and names what is missing", () => {
    fsyncPath(dir);
    fsyncPath(path.join(dir, "slot.img"));
    expect(() => fsyncPath(path.join(dir, "missing"))).toThrowError(/cannot sync .*ENOENT|No such/);
  });
});

describe("trimMemory", () => {
  // In a process of its own (vitest's workers allocate beside the test): 64 Ki Buffers of
  // 1000 bytes each from malloc, one in 64 kept, so the freed rest sits in the middle of the
  // arena where free() leaves it resident. The addon is the one src/native/index.ts loads.
  const addon = fileURLToPath(new URL("../../build/Release/liken_native.node", import.meta.url));
  const script = `
const { readFileSync } = require("node:fs");
const native = require(process.argv[1]);
const rssAnon = () => Number(/RssAnon:\\s+(\\d+)/.exec(readFileSync("/proc/self/status", "utf8"))[1]) / 1024;
let bufs = [];
for (let i = 0; i < 65536; i++) bufs.push(Buffer.allocUnsafeSlow(1000));
const keep = bufs.filter((_, i) => i % 64 === 0);
bufs = null;
// V8 frees ArrayBuffers' memory on a background thread after a collection: wait it out.
(async () => {
  for (let i = 0; i < 5; i++) {
    gc();
    await new Promise((r) => setTimeout(r, 100));
  }
  const before = rssAnon();
  const released = native.trimMemory();
  const after = rssAnon();
  console.log(JSON.stringify({ before, after, released, kept: keep.length }));
})();
`;

  it("hands the arenas' free pages back to the kernel", async () => {
    const out = await new Promise<string>((resolve, reject) => {
      const c = spawn(process.execPath, ["--expose-gc", "-e", script, addon]);
      let text = "";
      c.stdout.on("data", (d: Buffer) => (text += d.toString()));
      c.stderr.on("data", (d: Buffer) => (text += d.toString()));
      c.on("error", reject);
      c.on("exit", (code) => (code === 0 ? resolve(text) : reject(new Error(text))));
    });
    const r = JSON.parse(out) as { before: number; after: number; released: boolean };
    expect(r.released).toBe(true);
    // About 60 MiB of the 64 freed are in whole free pages (measured: 68 MiB released;
    // without the trim, nothing).
    expect(r.before - r.after).toBeGreaterThan(16);
  });
});
