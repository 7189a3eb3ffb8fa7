// The release document's refusals word for word, with the context a log or a caller reads,
// and the URL rules, where mutation testing (npm run test:mutation -- verify/release) found
// no test: what an unsafe path, a digest or version mismatch, a bad apiVersion or an empty
// artifact list says; the chunk size floor; releaseBase and artifactUrl at their edges.
import { describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { digestOf } from "../../src/verify/digest.js";
import { VerifyError } from "../../src/verify/errors.js";
import { artifactUrl, parseRelease, releaseBase, verifyRelease } from "../../src/verify/release.js";

const H = "a".repeat(64);
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Loose = Record<string, any>;
const good = (): Loose => ({
  apiVersion: "liken.sh/v1alpha1",
  kind: "Release",
  version: "2026.10.10-001",
  artifacts: [{ name: "boot", path: "boot.img", size: 10, digest: `sha256:${H}`, offset: 0 }],
});
const doc = (f: (r: Loose) => void = () => undefined): Buffer => {
  const r = good();
  f(r);
  return Buffer.from(stringify(r));
};

function refusal(fn: () => unknown): VerifyError {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(VerifyError);
    return e as VerifyError;
  }
  throw new Error("expected a refusal");
}

describe("parseRelease refusals, word for word", () => {
  it.each([
    [
      "a path that leaves the release directory",
      (r: Loose) => (r.artifacts[0].path = "a/../../x"),
      "LIKEN_VERIFY_PATH_UNSAFE",
      'release.yaml: artifacts[0].path "a/../../x" leaves the release directory; an artifact must live under <source>/<version>/',
      { field: "artifacts[0].path", path: "a/../../x" },
    ],
    [
      "a URL",
      (r: Loose) => (r.artifacts[0].path = "https://evil.example/boot.img"),
      "LIKEN_VERIFY_PATH_UNSAFE",
      'release.yaml: artifacts[0].path "https://evil.example/boot.img" is an absolute path or URL; an artifact must be a relative path under <source>/<version>/',
      { field: "artifacts[0].path", path: "https://evil.example/boot.img" },
    ],
    [
      "a scheme in capitals",
      (r: Loose) => (r.artifacts[0].path = "FILE:boot.img"),
      "LIKEN_VERIFY_PATH_UNSAFE",
      'release.yaml: artifacts[0].path "FILE:boot.img" is an absolute path or URL; an artifact must be a relative path under <source>/<version>/',
      { field: "artifacts[0].path", path: "FILE:boot.img" },
    ],
  ])("%s", (_name, f, code, message, context) => {
    const e = refusal(() => parseRelease(doc(f)));
    expect(e.code).toBe(code);
    expect(e.message).toBe(message);
    expect(e.context).toEqual(context);
  });

  it("quotes at most 80 characters of a hostile path", () => {
    const long = `${"../".repeat(40)}x`;
    const e = refusal(() => parseRelease(doc((r) => (r.artifacts[0].path = long))));
    expect(e.message).toContain(`"${long.slice(0, 80)}" leaves`);
    expect(e.context).toEqual({ field: "artifacts[0].path", path: long });
    const url = `https://${"e".repeat(100)}.example/x`;
    const u = refusal(() => parseRelease(doc((r) => (r.artifacts[0].path = url))));
    expect(u.message).toContain(`"${url.slice(0, 80)}" is an absolute path`);
  });

  it("a document too large or not YAML is named as release.yaml", () => {
    const big = refusal(() => parseRelease(Buffer.alloc(1024 * 1024 + 1, 0x20)));
    expect(big.message).toBe(
      "release.yaml: 1048577 bytes is more than the 1048576 a valid document can have; refused before parsing",
    );
    const bad = refusal(() => parseRelease(Buffer.from("kind: [")));
    expect(bad.message).toMatch(/^release\.yaml: not valid YAML for liken \(/);
  });

  it("an artifact that is not a mapping is refused as such, not a crash", () => {
    const e = refusal(() => parseRelease(doc((r) => (r.artifacts = [null]))));
    expect(e.code).toBe("LIKEN_VERIFY_DOCUMENT_INVALID");
  });

  it.each([
    ["apiVersion", (r: Loose) => (r.apiVersion = "v1"), "must be liken.sh/v1alpha1"],
    ["version", (r: Loose) => (r.version = "-1"), "letters, digits, '.', '_', '+', '-'"],
    ["artifacts", (r: Loose) => (r.artifacts = []), "must name at least one artifact"],
    [
      "artifacts",
      (r: Loose) => r.artifacts.push({ ...r.artifacts[0], offset: 4096 }),
      "names boot twice",
    ],
    [
      "artifacts[0].name",
      (r: Loose) => (r.artifacts[0].name = "Boot"),
      "lowercase letters, digits and '-'",
    ],
    [
      "artifacts[0].chunks.size",
      (r: Loose) => (r.artifacts[0].chunks = { size: 32 * 1024, digests: [H] }),
      "65536",
    ],
  ])("%s: %s", (field, f, words) => {
    const e = refusal(() => parseRelease(doc(f)));
    expect(e.code).toBe("LIKEN_VERIFY_DOCUMENT_INVALID");
    expect(e.message).toContain(field);
    expect(e.message).toContain(words);
  });

  it("says how many chunk digests an artifact has and needs", () => {
    const e = refusal(() =>
      parseRelease(
        doc(
          (r) =>
            (r.artifacts[0] = {
              ...r.artifacts[0],
              size: 70_000,
              chunks: { size: 65536, digests: [H] },
            }),
        ),
      ),
    );
    expect(e.message).toContain(
      "artifacts[0].chunks.digests has 1 digests; an artifact of 70000 bytes in chunks of 65536 has 2",
    );
  });
});

describe("verifyRelease refusals carry what was wanted and what came", () => {
  const bytes = doc();
  it("a digest mismatch", () => {
    const want = `sha256:${"b".repeat(64)}`;
    const e = refusal(() => verifyRelease(bytes, { version: "2026.10.10-001", digest: want }));
    expect(e.message).toBe(
      `release.yaml of 2026.10.10-001 has digest ${digestOf(bytes)}, the catalog says ${want}; nothing was written. Check the catalog entry (liken release catalog-entry) or the channel`,
    );
    expect(e.context).toEqual({ version: "2026.10.10-001", got: digestOf(bytes), want });
  });

  it("another release's document", () => {
    const e = refusal(() =>
      verifyRelease(bytes, { version: "2026.11.01-001", digest: digestOf(bytes) }),
    );
    expect(e.message).toBe(
      "release.yaml declares version 2026.10.10-001 but was fetched as 2026.11.01-001; the catalog entry names another release's document",
    );
    expect(e.context).toEqual({ want: "2026.11.01-001", got: "2026.10.10-001" });
  });
});

describe("release and artifact URLs", () => {
  it("a source with or without its trailing slash gives the same release directory", () => {
    for (const source of ["https://r.example/stable", "https://r.example/stable/"]) {
      expect(releaseBase(source, "1.0").href).toBe("https://r.example/stable/1.0/");
    }
  });

  it("refuses a version that would leave the channel", () => {
    const e = refusal(() => releaseBase("https://r.example/stable", "1..2"));
    expect(e.code).toBe("LIKEN_VERIFY_DOCUMENT_INVALID");
    expect(e.message).toBe('version "1..2" is not a valid liken version');
  });

  it("refuses an artifact on another origin even under the same path, and says where it went", () => {
    const base = releaseBase("https://r.example/stable", "1.0");
    const e = refusal(() =>
      artifactUrl(base, { name: "boot", path: "//evil.example/stable/1.0/boot.img" }),
    );
    expect(e.code).toBe("LIKEN_VERIFY_PATH_UNSAFE");
    expect(e.message).toBe(
      "artifact boot: //evil.example/stable/1.0/boot.img resolves to https://evil.example/stable/1.0/boot.img, outside https://r.example/stable/1.0/",
    );
  });
});

describe("revertFloor (docs/revert.md)", () => {
  it("is read when present, absent otherwise", () => {
    expect(parseRelease(doc((r) => (r.revertFloor = "2026.10.01-001"))).revertFloor).toBe(
      "2026.10.01-001",
    );
    expect(parseRelease(doc())).not.toHaveProperty("revertFloor");
  });

  it.each([
    [
      "a number",
      20261001,
      "release.yaml: revertFloor must be a string (a liken version: letters, digits, '.', '_', '+', '-')",
    ],
    [
      "not a version",
      "../x y",
      "release.yaml: revertFloor \"../x y\" is not valid: a liken version: letters, digits, '.', '_', '+', '-'",
    ],
  ])("refuses %s, naming the field", (_name, value, message) => {
    const e = refusal(() => parseRelease(doc((r) => (r.revertFloor = value))));
    expect(e.code).toBe("LIKEN_VERIFY_DOCUMENT_INVALID");
    expect(e.message).toBe(message);
  });
});
