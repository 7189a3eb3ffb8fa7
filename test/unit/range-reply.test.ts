// Which replies to a closed Range an adaptive download uses: only the exact bytes asked for.
import { describe, expect, it } from "vitest";
import { checkRangeReply } from "../../src/verify/fetch.js";

describe("checkRangeReply", () => {
  it.each([
    ["the exact range", 206, "bytes 100-199/1000", "100", undefined, undefined],
    [
      "Range ignored",
      200,
      undefined,
      "1000",
      "ignored",
      /the server ignored Range \(HTTP 200 to bytes=100-199\)/,
    ],
    [
      "a capped range",
      206,
      "bytes 100-149/1000",
      "50",
      "capped",
      /caps ranges: asked bytes=100-199 \(100 bytes\), got bytes 100-149 \(50\)/,
    ],
    [
      "another start",
      206,
      "bytes 0-99/1000",
      "100",
      "wrong-range",
      /"bytes 0-99\/1000" does not answer bytes=100-199/,
    ],
    ["more than asked", 206, "bytes 100-299/1000", "200", "wrong-range", /does not answer/],
    [
      "another size",
      206,
      "bytes 100-199/2000",
      "100",
      "wrong-range",
      /gives the artifact 2000 bytes, release.yaml says 1000/,
    ],
    ["an unknown size", 206, "bytes 100-199/*", "100", "wrong-range", /is not bytes a-b\/size/],
    ["no Content-Range", 206, undefined, "100", "wrong-range", /Content-Range "" to bytes=100-199/],
    [
      "a lying length",
      206,
      "bytes 100-199/1000",
      "99",
      "wrong-range",
      /Content-Length 99 to bytes=100-199 is not 100/,
    ],
    ["a 404", 404, undefined, "9", "status", /HTTP 404 to bytes=100-199/],
  ])("%s", (_name, status, cr, length, kind, reason) => {
    const f = checkRangeReply(
      status,
      { "content-range": cr, "content-length": length },
      100,
      199,
      1000,
    );
    expect(f?.kind).toBe(kind);
    if (reason) expect(f?.reason).toMatch(reason);
  });

  it.each([
    ["whole artifact with 200 and its length", 200, "1000", undefined],
    ["whole artifact with 200 and no length", 200, undefined, undefined],
    ["whole artifact with 200 and a short length", 200, "999", "ignored"],
  ])("a range of the whole artifact: %s", (_name, status, length, kind) => {
    // RFC 9110 lets a server answer a range of the whole representation with a plain 200.
    expect(checkRangeReply(status, { "content-length": length }, 0, 999, 1000)?.kind).toBe(kind);
  });
});
