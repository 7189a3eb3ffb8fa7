// The reader of untrusted YAML documents, table by table: the size cap, aliases and duplicate
// keys refused, and every field error naming the document, the field path and what is wanted.
import { describe, expect, it } from "vitest";
import { Fields, parseCappedYaml } from "../../src/verify/document.js";
import { VerifyError } from "../../src/verify/errors.js";

const bytes = (s: string): Uint8Array => Buffer.from(s);

/** The error `f` throws: its code, message and context. */
function refusal(f: () => unknown): { code: string; message: string; context: unknown } {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(VerifyError);
    const v = e as VerifyError;
    return { code: v.code, message: v.message, context: v.context };
  }
  throw new Error("expected a refusal");
}

describe("parseCappedYaml", () => {
  it("parses a document exactly at the cap", () => {
    expect(parseCappedYaml(bytes("a: 1"), "doc", 4)).toEqual({ a: 1 });
  });

  it("refuses one byte over the cap before parsing, and says so", () => {
    expect(refusal(() => parseCappedYaml(bytes("a: 12"), "doc", 4))).toEqual({
      code: "LIKEN_VERIFY_DOCUMENT_TOO_LARGE",
      message: "doc: 5 bytes is more than the 4 a valid document can have; refused before parsing",
      context: { what: "doc", size: 5, maxBytes: 4 },
    });
  });

  it("names the parser's first line, not the whole report", () => {
    const r = refusal(() => parseCappedYaml(bytes("a: 1\na: 2\n"), "doc", 1000));
    expect(r.message).toMatch(/^doc: not valid YAML for liken \(Map keys must be unique/);
  });

  it.each([
    ["an alias", "a: &x 1\nb: *x\n"],
    ["a duplicate key", "a: 1\na: 2\n"],
    ["a tab where YAML wants spaces", "a:\n\t- 1\n"],
  ])("refuses %s", (_name, text) => {
    const r = refusal(() => parseCappedYaml(bytes(text), "doc", 1000));
    expect(r.code).toBe("LIKEN_VERIFY_DOCUMENT_INVALID");
    expect(r.message).toMatch(
      /^doc: not valid YAML for liken \([^\n]+\); aliases and duplicate keys are refused$/,
    );
    expect(r.context).toEqual({ what: "doc" });
  });
});

describe("Fields", () => {
  const doc = Fields.root("release.yaml", {
    name: "rootfs",
    size: 10,
    neg: -1,
    frac: 1.5,
    text: "7",
    list: [{ a: 1 }, 2],
    sub: { k: "v" },
  });

  it("reads what is there", () => {
    expect(doc.str("name")).toBe("rootfs");
    expect(doc.str("name", /^root/)).toBe("rootfs");
    expect(doc.int("size", 10, 10)).toBe(10);
    expect(doc.list("list", 2)).toHaveLength(2);
    expect(doc.obj("sub").str("k")).toBe("v");
    expect(doc.item("list", 0, { a: 1 }).int("a", 1)).toBe(1);
    expect(doc.optional("name")).toBe(true);
    expect(doc.optional("missing")).toBe(false);
    expect(doc.only(["name", "size", "neg", "frac", "text", "list", "sub"])).toBe(doc);
  });

  it.each([
    [() => doc.str("size"), "release.yaml: size must be a string"],
    [() => doc.str("size", /x/, "a name"), "release.yaml: size must be a string (a name)"],
    [() => doc.str("name", /^x/), 'release.yaml: name "rootfs" is not valid'],
    [
      () => doc.str("name", /^x/, "lower case"),
      'release.yaml: name "rootfs" is not valid: lower case',
    ],
    [
      () => doc.int("size", 11),
      `release.yaml: size must be a whole number from 11 to ${Number.MAX_SAFE_INTEGER}`,
    ],
    [() => doc.int("size", 0, 9), "release.yaml: size must be a whole number from 0 to 9"],
    [
      () => doc.int("frac", 0),
      `release.yaml: frac must be a whole number from 0 to ${Number.MAX_SAFE_INTEGER}`,
    ],
    [
      () => doc.int("text", 0),
      `release.yaml: text must be a whole number from 0 to ${Number.MAX_SAFE_INTEGER}`,
    ],
    [() => doc.list("sub", 5), "release.yaml: sub must be a list"],
    [() => doc.list("list", 1), "release.yaml: list has 2 items; at most 1 are allowed"],
    [
      () => doc.only(["name", "text"]),
      "release.yaml: size is not a known field (known: name, text)",
    ],
    [() => doc.obj("name"), "release.yaml: name must be a mapping"],
    [() => doc.obj("list"), "release.yaml: list must be a mapping"],
    [() => doc.obj("missing"), "release.yaml: missing must be a mapping"],
    [() => doc.item("list", 1, 2), "release.yaml: list[1] must be a mapping"],
    [
      () => doc.obj("sub").int("k", 0),
      `release.yaml: sub.k must be a whole number from 0 to ${Number.MAX_SAFE_INTEGER}`,
    ],
    [() => Fields.root("channel.yaml", null), "channel.yaml: (document) must be a mapping"],
    [() => Fields.root("channel.yaml", "text"), "channel.yaml: (document) must be a mapping"],
  ] as [() => unknown, string][])("%#: %s", (f, message) => {
    const r = refusal(f);
    expect(r.code).toBe("LIKEN_VERIFY_DOCUMENT_INVALID");
    expect(r.message).toBe(message);
  });

  it("names the field path in the context", () => {
    expect(refusal(() => doc.obj("sub").str("missing")).context).toEqual({
      what: "release.yaml",
      field: "sub.missing",
    });
    expect(refusal(() => doc.item("list", 1, 2)).context).toEqual({
      what: "release.yaml",
      field: "list[1]",
    });
  });

  it("cuts a long refused value to 80 characters", () => {
    const long = Fields.root("d", { v: "x".repeat(100) });
    expect(refusal(() => long.str("v", /^y/)).message).toBe(
      `d: v "${"x".repeat(80)}" is not valid`,
    );
  });
});
