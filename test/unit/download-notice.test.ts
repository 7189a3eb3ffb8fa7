// What the Machine says of a failed download (src/agent/download-notice.ts): the coded line of
// the child's stderr, what to do for its code, and when the agent tries again.
import { describe, expect, it } from "vitest";
import {
  childFailure,
  failedNotice,
  parseRangeIgnored,
  whatToDo,
} from "../../src/agent/download-notice.js";
import { RETRY_BACKOFF_MAX, retryDelayMs } from "../../src/agent/download.js";

describe("download notice", () => {
  it("takes the coded failure line, even when a log line follows it", () => {
    const tail = [
      "liken: write: begin",
      "liken: artifact rootfs: GET http://h/2.0/x.img: HTTP 503; the server failed [LIKEN_VERIFY_HTTP_STATUS]",
      "liken: a late log line",
    ].join("\n");
    expect(childFailure(tail)).toEqual({
      text: "artifact rootfs: GET http://h/2.0/x.img: HTTP 503; the server failed",
      code: "LIKEN_VERIFY_HTTP_STATUS",
    });
    expect(childFailure("liken: write: begin\n")).toEqual({ text: "write: begin" });
    expect(childFailure("")).toEqual({ text: "it said nothing" });
  });

  it.each([
    ["LIKEN_VERIFY_HTTP_STATUS", "HTTP 404", /spec\.releases\.source/],
    ["LIKEN_VERIFY_HTTP_STATUS", "HTTP 503", /server's own log/],
    ["LIKEN_VERIFY_CONNECTION", "", /up and that this machine reaches it/],
    ["LIKEN_NATIVE_CHUNK_MISMATCH", "", /other bytes than release\.yaml names/],
    [undefined, "", /journalctl -u liken-agent/],
  ])("says what to do for %s %s", (code, text, hint) => {
    expect(whatToDo(code, text)).toMatch(hint);
  });

  it("names the signal when the child was killed without a word", () => {
    const n = failedNotice(
      { version: "2.0", slot: "b", tail: "liken: write: begin", exitCode: null },
      { inMs: 240_000, failures: 3 },
    );
    expect(n.message).toMatch(/failed: write: begin \(killed by a signal\); what to do: /);
    expect(n.message).toMatch(/next attempt in 4 min \(3 failures in a row\)$/);
  });

  it("backs off: 1, 2, 4, 8, then 16 times the retry delay", () => {
    expect([1, 2, 3, 4, 5, 6, 20].map((n) => retryDelayMs(60_000, n) / 60_000)).toEqual([
      1, 2, 4, 8, 16, 16, 16,
    ]);
    expect(RETRY_BACKOFF_MAX).toBe(16);
  });

  it("reads the child's range-ignored line", () => {
    expect(parseRangeIgnored("liken: range-ignored: GET u: the server ignored Range")).toBe(
      "GET u: the server ignored Range",
    );
    expect(parseRangeIgnored("liken: write: begin")).toBeUndefined();
  });
});
