import { describe, expect, it } from "vitest";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { stringify } from "yaml";
import { buildRelease, catalogEntry } from "../../src/release/build.js";
import { newestVersion, parseChannel } from "../../src/verify/channel.js";
import { digestOf, sha256Hex } from "../../src/verify/digest.js";
import {
  artifactUrl,
  parseRelease,
  releaseBase,
  verifyRelease,
  type Release,
} from "../../src/verify/release.js";
import { VerifyError } from "../../src/verify/errors.js";

const H = "a".repeat(64);
const good = (): Release => ({
  apiVersion: "liken.sh/v1alpha1",
  kind: "Release",
  version: "2026.10.10-001",
  artifacts: [
    { name: "boot", path: "boot.img", size: 10, digest: `sha256:${H}`, offset: 0 },
    {
      name: "rootfs",
      path: "images/rootfs.img",
      size: 5 * 1024 * 1024,
      digest: `sha256:${H}`,
      offset: 4096,
      chunks: { size: 4 * 1024 * 1024, digests: [H, H] },
    },
  ],
});
const bytes = (v: unknown) => Buffer.from(typeof v === "string" ? v : stringify(v));

function refusal(fn: () => unknown): VerifyError {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(VerifyError);
    return e as VerifyError;
  }
  throw new Error("expected a refusal");
}

describe("parseRelease", () => {
  it("reads a valid document", () => {
    expect(parseRelease(bytes(good()))).toEqual(good());
  });

  // The cases write invalid shapes on purpose, which no precise type allows.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  type Loose = Record<string, any>;
  const edit = (f: (r: Loose) => void) => {
    const r = good() as unknown as Loose;
    f(r);
    return bytes(r);
  };
  const ref = (p: string, size: number) => ({ path: p, size, digest: `sha256:${H}` });
  const cases: [string, Buffer, string, RegExp][] = [
    [
      "a pack without its index pages",
      edit((r) => {
        r.artifacts[1].index = ref("r.lkidx", 64);
        r.artifacts[1].pack = ref("r.lkpack", 64);
      }),
      "LIKEN_VERIFY_DOCUMENT_INVALID",
      /pack, indexTop and indexPages come together, with index/,
    ],
    [
      "a top index larger than the artifact allows",
      edit((r) => {
        r.artifacts[1].index = ref("r.lkidx", 64);
        r.artifacts[1].pack = ref("r.lkpack", 64);
        r.artifacts[1].indexTop = ref("r.lktop", 10_000_000);
        r.artifacts[1].indexPages = ref("r.lkpages", 64);
      }),
      "LIKEN_VERIFY_DOCUMENT_INVALID",
      /indexTop\.size/,
    ],
    [
      "unknown field",
      edit((r) => (r.artifacts[0].sizee = 1)),
      "LIKEN_VERIFY_DOCUMENT_INVALID",
      /artifacts\[0\]\.sizee is not a known field/,
    ],
    [
      "wrong kind",
      edit((r) => (r.kind = "Channel")),
      "LIKEN_VERIFY_DOCUMENT_INVALID",
      /kind must be Release/,
    ],
    [
      "missing size",
      edit((r) => delete r.artifacts[1].size),
      "LIKEN_VERIFY_DOCUMENT_INVALID",
      /artifacts\[1\]\.size must be a whole number/,
    ],
    [
      "bad digest",
      edit((r) => (r.artifacts[0].digest = "md5:abc")),
      "LIKEN_VERIFY_DOCUMENT_INVALID",
      /artifacts\[0\]\.digest .* sha256:/,
    ],
    [
      "dot-dot path",
      edit((r) => (r.artifacts[0].path = "../2026.01.01/boot.img")),
      "LIKEN_VERIFY_PATH_UNSAFE",
      /leaves the release directory/,
    ],
    [
      "inner dot-dot",
      edit((r) => (r.artifacts[0].path = "a/../../x")),
      "LIKEN_VERIFY_PATH_UNSAFE",
      /leaves the release directory/,
    ],
    [
      "absolute URL",
      edit((r) => (r.artifacts[0].path = "https://evil.example/boot.img")),
      "LIKEN_VERIFY_PATH_UNSAFE",
      /absolute path or URL/,
    ],
    [
      "protocol-relative",
      edit((r) => (r.artifacts[0].path = "//evil.example/boot.img")),
      "LIKEN_VERIFY_PATH_UNSAFE",
      /absolute path or URL/,
    ],
    [
      "absolute path",
      edit((r) => (r.artifacts[0].path = "/etc/shadow")),
      "LIKEN_VERIFY_PATH_UNSAFE",
      /absolute path or URL/,
    ],
    [
      "encoded dots",
      edit((r) => (r.artifacts[0].path = "%2e%2e/boot.img")),
      "LIKEN_VERIFY_PATH_UNSAFE",
      /absolute path or URL/,
    ],
    [
      "chunk count",
      edit((r) => r.artifacts[1].chunks.digests.pop()),
      "LIKEN_VERIFY_DOCUMENT_INVALID",
      /has 1 digests; .* has 2/,
    ],
    [
      "chunk size",
      edit((r) => (r.artifacts[1].chunks.size = 3_000_000)),
      "LIKEN_VERIFY_DOCUMENT_INVALID",
      /chunks\.size must be a power of two/,
    ],
    [
      "unaligned offset",
      edit((r) => (r.artifacts[1].offset = 100)),
      "LIKEN_VERIFY_DOCUMENT_INVALID",
      /offset must be a multiple of 4096/,
    ],
    [
      "overlap",
      edit((r) => (r.artifacts[1].offset = 0)),
      "LIKEN_VERIFY_DOCUMENT_INVALID",
      /boot and rootfs overlap/,
    ],
    [
      "duplicate name",
      edit((r) => (r.artifacts[1].name = "boot")),
      "LIKEN_VERIFY_DOCUMENT_INVALID",
      /names boot twice/,
    ],
    [
      "initrd without kernel",
      edit((r) => (r.artifacts[0].name = "initrd")),
      "LIKEN_VERIFY_DOCUMENT_INVALID",
      /artifacts\[0\]\.name is initrd but no artifact is named kernel: .* add it/,
    ],
    [
      "version with ..",
      edit((r) => (r.version = "1..2")),
      "LIKEN_VERIFY_DOCUMENT_INVALID",
      /version must not contain/,
    ],
    [
      "no artifacts",
      edit((r) => (r.artifacts = [])),
      "LIKEN_VERIFY_DOCUMENT_INVALID",
      /at least one artifact/,
    ],
    [
      "duplicate key",
      bytes("kind: Release\nkind: Release\n"),
      "LIKEN_VERIFY_DOCUMENT_INVALID",
      /not valid YAML/,
    ],
    [
      "not a mapping",
      bytes("- 1\n- 2\n"),
      "LIKEN_VERIFY_DOCUMENT_INVALID",
      /\(document\) must be a mapping/,
    ],
    [
      "alias bomb",
      bytes(
        "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: [*b, *b, *b, *b, *b, *b, *b, *b, *b]\n",
      ),
      "LIKEN_VERIFY_DOCUMENT_INVALID",
      /aliases .* refused|alias/i,
    ],
    [
      "huge document",
      Buffer.alloc(1024 * 1024 + 1, 0x20),
      "LIKEN_VERIFY_DOCUMENT_TOO_LARGE",
      /1048577 bytes .* refused before parsing/,
    ],
  ];
  it.each(cases)("refuses %s with a code and the field", (_name, doc, code, message) => {
    const e = refusal(() => parseRelease(doc));
    expect(e.code).toBe(code);
    expect(e.message).toMatch(message);
  });
});

describe("verifyRelease: the first links of the trust chain", () => {
  const doc = bytes(good());
  it("accepts the bytes the catalog digest names", () => {
    expect(verifyRelease(doc, { version: "2026.10.10-001", digest: digestOf(doc) }).version).toBe(
      "2026.10.10-001",
    );
  });
  it("refuses bytes whose digest differs from the catalog, before parsing them", () => {
    const e = refusal(() =>
      verifyRelease(Buffer.from("{{{ not yaml"), { version: "v", digest: digestOf(doc) }),
    );
    expect(e.code).toBe("LIKEN_VERIFY_DIGEST_MISMATCH");
    expect(e.message).toMatch(/the catalog says sha256:/);
  });
  it("refuses another release's document mixed in under this version", () => {
    const e = refusal(() =>
      verifyRelease(doc, { version: "2026.11.01-001", digest: digestOf(doc) }),
    );
    expect(e.code).toBe("LIKEN_VERIFY_VERSION_MISMATCH");
  });
});

describe("artifact URLs", () => {
  it("resolves under <source>/<version>/ and nowhere else", () => {
    const base = releaseBase("https://releases.liken.sh/stable", "2026.10.10-001");
    expect(base.href).toBe("https://releases.liken.sh/stable/2026.10.10-001/");
    expect(artifactUrl(base, { name: "a", path: "images/rootfs.img" }).href).toBe(
      "https://releases.liken.sh/stable/2026.10.10-001/images/rootfs.img",
    );
    expect(() => artifactUrl(base, { name: "a", path: "../x" })).toThrowError(/outside/);
    expect(() => artifactUrl(base, { name: "a", path: "//evil.example/x" })).toThrowError(
      /outside/,
    );
  });
});

describe("channel", () => {
  it("reads versions newest last and refuses duplicates", () => {
    const c = parseChannel(
      bytes({
        apiVersion: "liken.sh/v1alpha1",
        kind: "Channel",
        versions: [
          { version: "1", digest: `sha256:${H}` },
          { version: "2", digest: `sha256:${H}` },
        ],
      }),
    );
    expect(newestVersion(c)?.version).toBe("2");
    const e = refusal(() =>
      parseChannel(
        bytes({
          apiVersion: "liken.sh/v1alpha1",
          kind: "Channel",
          versions: [
            { version: "1", digest: `sha256:${H}` },
            { version: "1", digest: `sha256:${H}` },
          ],
        }),
      ),
    );
    expect(e.message).toMatch(/versions\[1\]\.version 1 is announced twice/);
  });
});

describe("buildRelease", () => {
  it("publishes artifacts with digests and chunks, appends to the channel, and round-trips", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "liken-build-"));
    try {
      const boot = path.join(dir, "boot.img");
      const root = path.join(dir, "rootfs.img");
      writeFileSync(boot, Buffer.alloc(5000, 1));
      const rootBytes = Buffer.alloc(200_000, 2);
      rootBytes[150_000] = 9;
      writeFileSync(root, rootBytes);
      const out = path.join(dir, "channel");
      const a = await buildRelease({
        version: "1.0",
        out,
        chunkSize: 65536,
        artifacts: [
          { name: "boot", file: boot },
          { name: "rootfs", file: root },
        ],
      });
      const b = await buildRelease({
        version: "1.1",
        out,
        artifacts: [{ name: "boot", file: boot }],
      });
      const doc = readFileSync(path.join(out, "1.0", "release.yaml"));
      expect(digestOf(doc)).toBe(a.digest);
      const r = verifyRelease(doc, { version: "1.0", digest: a.digest });
      expect(r.artifacts.map((x) => [x.name, x.size, x.offset])).toEqual([
        ["boot", 5000, 0],
        ["rootfs", 200_000, 8192],
      ]);
      expect(r.artifacts[1]!.chunks!.digests).toHaveLength(4);
      expect(r.artifacts[1]!.chunks!.digests[2]).toBe(
        sha256Hex(rootBytes.subarray(131072, 196608)),
      );
      expect(r.artifacts[1]!.digest).toBe(digestOf(rootBytes));
      expect(readFileSync(path.join(out, "1.0", "rootfs.img")).equals(rootBytes)).toBe(true);
      const c = parseChannel(readFileSync(path.join(out, "channel.yaml")));
      expect(c.versions).toEqual([
        { version: "1.0", digest: a.digest },
        { version: "1.1", digest: b.digest },
      ]);
      await expect(
        buildRelease({ version: "1.0", out, artifacts: [{ name: "boot", file: boot }] }),
      ).rejects.toThrowError(/never changes/);
      expect(catalogEntry("1.0", a.digest)).toBe(`- version: "1.0"\n  digest: ${a.digest}\n`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("buildRelease refused leaves nothing behind", () => {
  it("a missing artifact is named before anything is written", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "liken-build-"));
    try {
      const out = path.join(dir, "channel");
      const err = await buildRelease({
        version: "1.0",
        out,
        artifacts: [{ name: "rootfs", file: path.join(dir, "slot.img") }],
      }).catch((e: unknown) => e);
      expect(err).toMatchObject({ code: "LIKEN_RELEASE_ARTIFACT_UNREADABLE" });
      expect((err as Error).message).toContain(
        `rootfs=${path.join(dir, "slot.img")} does not exist`,
      );
      expect(existsSync(path.join(out, "1.0")), "channel/1.0/ left behind").toBe(false);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("a release refused after its files were copied removes its directory, not the channel", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "liken-build-"));
    try {
      const boot = path.join(dir, "boot.img");
      writeFileSync(boot, Buffer.alloc(5000, 1));
      const out = path.join(dir, "channel");
      await buildRelease({ version: "1.0", out, artifacts: [{ name: "boot", file: boot }] });
      // Two artifacts at overlapping offsets: refused by the layout check, after the copy.
      await expect(
        buildRelease({
          version: "1.1",
          out,
          artifacts: [
            { name: "boot", file: boot, offset: 0 },
            { name: "rootfs", file: boot, offset: 4096 },
          ],
        }),
      ).rejects.toThrow();
      expect(existsSync(path.join(out, "1.1")), "channel/1.1/ left behind").toBe(false);
      expect(existsSync(path.join(out, "1.0", "release.yaml"))).toBe(true);
      expect(parseChannel(readFileSync(path.join(out, "channel.yaml"))).versions).toHaveLength(1);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("parseRelease: the patterns are anchored, and the slot layout is exact", () => {
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  type Loose = Record<string, any>;
  const edit = (f: (r: Loose) => void): Buffer => {
    const r = good() as unknown as Loose;
    f(r);
    return bytes(r);
  };
  it.each([
    ["a version with a bad first character", (r: Loose) => (r.version = "-1.0"), "version"],
    ["a version with a bad last character", (r: Loose) => (r.version = "1.0/"), "version"],
    ["a name with a bad first character", (r: Loose) => (r.artifacts[0].name = "-boot"), "name"],
    ["a name with a bad last character", (r: Loose) => (r.artifacts[0].name = "boot!"), "name"],
    [
      "a path with a bad first character",
      (r: Loose) => (r.artifacts[0].path = "~boot.img"),
      "path",
    ],
    [
      "a path with a bad last character",
      (r: Loose) => (r.artifacts[0].path = "boot.img?x"),
      "path",
    ],
  ])("refuses %s", (_name, f, field) => {
    const e = refusal(() => parseRelease(edit(f)));
    expect(e.code).toBe("LIKEN_VERIFY_DOCUMENT_INVALID");
    expect(e.message).toContain(field);
  });

  it.each([
    [
      "a chunk digest that is not hex",
      (r: Loose) => (r.artifacts[1].chunks.digests[1] = "Z".repeat(64)),
      "release.yaml: artifacts[1].chunks.digests[1] must be 64 lowercase hex digits",
    ],
    [
      "a chunk digest that is not a string",
      (r: Loose) => (r.artifacts[1].chunks.digests[0] = 7),
      "release.yaml: artifacts[1].chunks.digests[0] must be 64 lowercase hex digits",
    ],
    [
      "a chunk size that is no power of two",
      (r: Loose) => (r.artifacts[1].chunks.size = 3 * 1024 * 1024),
      "release.yaml: artifacts[1].chunks.size must be a power of two (for example 4194304)",
    ],
    [
      "an artifact that is not a mapping",
      (r: Loose) => (r.artifacts[0] = "boot.img"),
      "release.yaml: artifacts[0] must be a mapping",
    ],
    [
      "an artifact path that is not a string",
      (r: Loose) => (r.artifacts[0].path = 5),
      "release.yaml: artifacts[0].path must be a string (a relative path inside the release directory)",
    ],
  ])("refuses %s, and says so", (_name, f, message) => {
    const e = refusal(() => parseRelease(edit(f)));
    expect(e.code).toBe("LIKEN_VERIFY_DOCUMENT_INVALID");
    expect(e.message).toBe(message);
  });

  it("accepts artifacts that touch end to start, in any order", () => {
    const doc = edit((r) => {
      r.artifacts[0].size = 4096;
      r.artifacts.reverse();
    });
    expect(parseRelease(doc).artifacts.map((a) => a.name)).toEqual(["rootfs", "boot"]);
  });

  it("refuses artifacts that overlap by one byte, whatever their order, and says where", () => {
    for (const reverse of [false, true]) {
      const doc = edit((r) => {
        r.artifacts[0].size = 4097;
        if (reverse) r.artifacts.reverse();
      });
      expect(refusal(() => parseRelease(doc)).message).toBe(
        "release.yaml: artifacts boot and rootfs overlap in the slot (boot ends at 4097, rootfs starts at 4096)",
      );
    }
  });

  it.each([
    ["a URL", "http://evil/x", "is an absolute path or URL"],
    ["an absolute path", "/etc/passwd", "is an absolute path or URL"],
    ["a parent directory", "a/../../x", "leaves the release directory"],
    ["the directory itself", "./x", "leaves the release directory"],
  ])("refuses %s as an artifact path with LIKEN_VERIFY_PATH_UNSAFE", (_name, p, says) => {
    const e = refusal(() => parseRelease(edit((r) => (r.artifacts[1].path = p))));
    expect(e.code).toBe("LIKEN_VERIFY_PATH_UNSAFE");
    expect(e.message).toContain(`release.yaml: artifacts[1].path "${p}" ${says}`);
  });
});
