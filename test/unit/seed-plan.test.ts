// The adaptive download's plan: local runs by device and contiguity, remote runs coalesced by
// fetching the smallest gaps within the budget, never more.
import { describe, expect, it } from "vitest";
import { planSeeded, type LocalSource } from "../../src/slots/seed-plan.js";

const B = 4096;
/** A layout as text: "R" running (in place), "r" running elsewhere, "T" target, "." remote. */
function plan(layout: string, budget?: number, first = 0) {
  return planSeeded({
    first,
    count: layout.length,
    offset: (i) => i * B,
    length: () => B,
    local: (i): LocalSource | undefined => {
      const c = layout[i];
      if (c === "R") return { device: "running", at: i * B };
      if (c === "r") return { device: "running", at: (1000 + 2 * i) * B };
      if (c === "T") return { device: "target", at: i * B };
      return undefined;
    },
    ...(budget !== undefined ? { mergeBudget: budget } : {}),
  });
}

const show = (p: ReturnType<typeof plan>) =>
  p.segments.map((s) => `${s.kind === "remote" ? "get" : s.device}:${s.first}-${s.last}`).join(" ");

describe("planSeeded", () => {
  it.each([
    ["all local, one read", "RRRR", undefined, "running:0-3"],
    ["all remote, one request", "....", undefined, "get:0-3"],
    [
      "scattered running chunks are separate reads",
      "Rrr",
      undefined,
      "running:0-0 running:1-1 running:2-2",
    ],
    ["devices alternate", "RRTT.R", undefined, "running:0-1 target:2-3 get:4-4 running:5-5"],
    ["a gap within the budget is fetched", "..R..", 0.25, "get:0-4"],
    ["a gap beyond the budget is read", "..R..", 0.2, "get:0-1 running:2-2 get:3-4"],
    ["smallest gaps first", "..RR..R..", 0.17, "get:0-1 running:2-3 get:4-8"],
    ["no budget, no merge", ".R.", 0, "get:0-0 running:1-1 get:2-2"],
    ["edges are never fetched", "R..R", 1, "running:0-0 get:1-2 running:3-3"],
  ])("%s", (_name, layout, budget, want) => {
    expect(show(plan(layout, budget))).toBe(want);
  });

  it("counts bytes and requests, and starts at the resume chunk", () => {
    const p = plan("RR..RR.", 0, 1);
    expect(show(p)).toBe("running:1-1 get:2-3 running:4-5 get:6-6");
    expect(p).toMatchObject({ localBytes: 3 * B, remoteBytes: 3 * B, requests: 2 });
  });

  it("keeps the fetched bytes within 1 + budget of the remote ones", () => {
    const layout = Array.from({ length: 2000 }, (_, i) =>
      i % 37 === 0 || i % 41 < 2 ? "." : "R",
    ).join("");
    const bare = plan(layout, 0);
    const p = plan(layout);
    expect(p.remoteBytes).toBeLessThanOrEqual(bare.remoteBytes * 1.04);
    expect(p.requests).toBeLessThan(bare.requests);
  });
});
