import { describe, expect, it } from "vitest";
import { look, nodeFacts } from "../../src/agent/observe.js";

const NODE = { verb: "get", kind: "Node", name: "m1" };

describe("a look at the API is an answer or a failure with its cause, never a verdict", () => {
  it("a 403 is a failed look with LIKEN_API_FORBIDDEN, not a Node that is not Ready", async () => {
    const forbidden = Object.assign(new Error("HTTP-Code: 403"), {
      code: 403,
      body: JSON.stringify({ kind: "Status", reason: "Forbidden", message: "nodes is forbidden" }),
    });
    const r = await look(NODE, () => Promise.reject(forbidden));
    expect(r).toMatchObject({ ok: false, error: { code: "LIKEN_API_FORBIDDEN" } });
    expect(nodeFacts(r)).toEqual({
      nodeReady: false,
      nodeUnread: expect.stringMatching(/nodes is forbidden.*\[LIKEN_API_FORBIDDEN\]/),
    });
  });

  it("a bug's TypeError keeps its text in the failed look", async () => {
    const r = await look(NODE, () => Promise.reject(new TypeError("x is not a function")));
    expect(r.ok).toBe(false);
    expect(nodeFacts(r).nodeUnread).toMatch(/x is not a function/);
  });

  it("an answer is a verdict: Ready or not", async () => {
    expect(nodeFacts(await look(NODE, () => Promise.resolve(false)))).toEqual({
      nodeReady: false,
      nodeUnread: undefined,
    });
    expect(nodeFacts({ ok: true, value: true })).toEqual({
      nodeReady: true,
      nodeUnread: undefined,
    });
  });
});
