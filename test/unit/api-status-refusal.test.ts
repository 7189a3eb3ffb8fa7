// The backoff and the words of a refused status write (src/api/status-refusal.ts); the real
// refusals are in test/integration/operator-bounds.test.ts and agent-status-refused.test.ts.
import { describe, expect, it } from "vitest";
import { ApiError, API_ERROR_CODES } from "../../src/api/errors.js";
import {
  RefusalBackoff,
  REFUSAL_FIRST_BACKOFF_MS,
  REFUSAL_MAX_BACKOFF_MS,
  refusalCondition,
  withoutRefusal,
  withRefusal,
} from "../../src/api/status-refusal.js";

describe("RefusalBackoff", () => {
  it("doubles from the first wait to the longest, and starts over once a write is accepted", () => {
    const b = new RefusalBackoff();
    const waits = Array.from({ length: 8 }, (_, i) => b.refused("lab", "3", i));
    expect(waits).toEqual([10_000, 20_000, 40_000, 80_000, 160_000, 300_000, 300_000, 300_000]);
    expect(waits[0]).toBe(REFUSAL_FIRST_BACKOFF_MS);
    expect(Math.max(...waits)).toBe(REFUSAL_MAX_BACKOFF_MS);
    b.clear("lab");
    expect(b.has("lab")).toBe(false);
    expect(b.refused("lab", "3", 0)).toBe(REFUSAL_FIRST_BACKOFF_MS);
  });

  it.each([
    ["the same write, inside the wait", "3", 9_999, true],
    ["the same write, at the end of the wait", "3", 10_000, false],
    ["a write made from something else (a new generation)", "4", 1, false],
    ["another object", "3", 1, false],
  ])("holds %s: %s", (_what, from, now, holds) => {
    const b = new RefusalBackoff();
    b.refused("lab", "3", 0);
    const key = _what === "another object" ? "other" : "lab";
    expect(b.holds(key, from, now)).toBe(holds);
  });
});

describe("refusalCondition", () => {
  it("names the object, the fields, the server's words, the retry and what to do", () => {
    const e = new ApiError(API_ERROR_CODES.invalid, "replace status of Cluster lab: ...", {
      httpStatus: 422,
      status: {
        kind: "Status",
        details: {
          causes: [{ field: "status.turns", message: "Too long: may not be more than 4096 bytes" }],
        },
      },
    });
    const c = refusalCondition("Cluster", "lab", e, 20_000);
    expect(c).toMatchObject({
      type: "StatusWriteRefused",
      status: "True",
      reason: "StatusInvalid",
    });
    expect(c.message).toContain(
      "the API server refused the status write of Cluster lab (422 Invalid): status.turns: Too long",
    );
    expect(c.message).toContain("liken writes it again in 20 s");
    expect(c.message).toContain("kubectl get crd clusters.liken.sh -o yaml");
    expect(c.message.length).toBeLessThanOrEqual(4096);
  });
});

describe("the condition in a list", () => {
  const other = { type: "Progressing", lastTransitionTime: "2026-12-04T05:00:00Z" };
  const cond = refusalCondition(
    "Machine",
    "m1",
    new ApiError(API_ERROR_CODES.invalid, "x", { httpStatus: 422 }),
    10_000,
  );

  it("is added once, keeping its first time while it holds, and taken away", () => {
    const once = withRefusal([other], cond, "2026-12-04T05:01:00Z");
    const twice = withRefusal(once, cond, "2026-12-04T05:02:00Z");
    expect(twice).toHaveLength(2);
    expect(twice[1]).toMatchObject({
      type: "StatusWriteRefused",
      lastTransitionTime: "2026-12-04T05:01:00Z",
    });
    expect(withoutRefusal(twice)).toEqual([other]);
    const plain = [other];
    expect(withoutRefusal(plain)).toBe(plain);
  });
});
