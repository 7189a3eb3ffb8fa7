// The entropy warning of `liken release build`: a compressed artifact warns, a filesystem of
// text and code does not.
import { describe, expect, it } from "vitest";
import { randomBytes } from "node:crypto";
import { gzipSync } from "node:zlib";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { buildRelease } from "../../src/release/build.js";
import { blockEntropy, EntropySampler, isKernelImage } from "../../src/release/entropy.js";

function sample(b: Buffer, piece = 65536): EntropySampler {
  const s = new EntropySampler();
  for (let o = 0; o < b.length; o += piece) s.update(b.subarray(o, o + piece));
  return s;
}

const text = Buffer.from(
  Array.from({ length: 200_000 }, (_, i) => `line ${i} of a config file, key=value${i % 7}\n`).join(
    "",
  ),
);

describe("entropy", () => {
  it("measures bits a byte", () => {
    expect(blockEntropy(Buffer.alloc(4096))).toBe(0);
    expect(blockEntropy(randomBytes(4096))).toBeGreaterThan(7.9);
  });
  it.each([
    ["random (compressed) bytes", randomBytes(2 << 20), true],
    [
      "gzip output",
      gzipSync(Buffer.from(randomBytes(3 << 20).toString("base64")), { level: 1 }),
      true,
    ],
    ["text", text, false],
    ["zeros", Buffer.alloc(2 << 20), false],
  ])("%s", (_name, data, want) => {
    expect(sample(data).looksCompressed).toBe(want);
    expect(sample(data, 1000).looksCompressed).toBe(want);
  });
});

describe("liken release build", () => {
  it("warns about an artifact compressed as a whole, not about a plain one", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "liken-entropy-"));
    try {
      writeFileSync(path.join(dir, "packed.img"), randomBytes(1 << 20));
      writeFileSync(path.join(dir, "plain.img"), text);
      const warnings: string[] = [];
      const r = await buildRelease({
        version: "1",
        out: path.join(dir, "channel"),
        artifacts: [
          { name: "packed", file: path.join(dir, "packed.img") },
          { name: "plain", file: path.join(dir, "plain.img") },
        ],
        warn: (m) => warnings.push(m),
      });
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toMatch(
        /^artifact packed \(.*packed\.img\) looks compressed as a whole \(high entropy\): no chunk of it can be reused/,
      );
      expect(r.release.artifacts.map((a) => a.index?.path)).toEqual([
        "packed.img.lkidx",
        "plain.img.lkidx",
      ]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

/** Random (compressed-looking) bytes with a header written at `off`. */
function withMagic(off: number, magic: string, size = 1 << 20): Buffer {
  const b = randomBytes(size);
  b.write(magic, off, "latin1");
  return b;
}

describe("the compressed-kernel warning names only what can be changed", () => {
  it.each([
    ["an x86 bzImage (HdrS at 0x202)", withMagic(0x202, "HdrS"), true],
    ["an EFI zboot image (zimg at 4)", withMagic(4, "zimg"), true],
    ["an arm64 Image", withMagic(0x38, "ARM\x64"), true],
    ["random bytes", randomBytes(4096), false],
    ["too short to tell", Buffer.from("MZ"), false],
  ])("%s", (_n, head, want) => {
    expect(isKernelImage(head)).toBe(want);
  });

  it("warns about the initrd with how to build it plain, never about a kernel", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "liken-entropy-"));
    try {
      const file = (name: string, b: Buffer): string => {
        writeFileSync(path.join(dir, name), b);
        return path.join(dir, name);
      };
      const warnings: string[] = [];
      await buildRelease({
        version: "1",
        out: path.join(dir, "channel"),
        artifacts: [
          { name: "rootfs", file: file("plain.img", text) },
          // A compressed kernel named as liken names it, and one told by its header alone.
          { name: "kernel", file: file("vmlinuz", randomBytes(1 << 20)) },
          { name: "boot-kernel", file: file("bzImage", withMagic(0x202, "HdrS")) },
          { name: "initrd", file: file("initrd.img", randomBytes(1 << 20)) },
        ],
        warn: (m) => warnings.push(m),
      });
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toMatch(/^artifact initrd \(.*initrd\.img\) looks compressed/);
      expect(warnings[0]).toContain("Build the initrd uncompressed");
      expect(warnings[0]).not.toContain("Publish the filesystem");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
