// src/api/bounds.ts holds the limit of every status field liken writes; the CRDs hold the
// same limits for the API server. These checks keep the two equal (a new bounded field in a
// CRD fails here until the table has it) and hold the helpers to their promise: never longer
// than asked, and saying how much was left out. The server side is in
// test/integration/operator-bounds.test.ts.
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import {
  CLUSTER_STATUS_BOUNDS,
  MACHINE_SPEC_BOUNDS,
  MACHINE_STATUS_BOUNDS,
  boundStatus,
  joinBounded,
  truncate,
  type Bound,
} from "../../src/api/bounds.js";

interface Schema {
  properties?: Record<string, Schema>;
  items?: Schema;
  maxItems?: number;
  maxLength?: number;
}

function statusSchema(file: string, part = "status"): Schema {
  const crd = parse(readFileSync(new URL(`../../config/crd/${file}`, import.meta.url), "utf8")) as {
    spec: { versions: { schema: { openAPIV3Schema: Schema } }[] };
  };
  return crd.spec.versions[0]!.schema.openAPIV3Schema.properties![part]!;
}

/** Every maxLength / maxItems under a schema, by the path bounds.ts uses ("a.b", "l[].c"). */
function boundsOf(s: Schema, path = ""): Record<string, Bound> {
  const out: Record<string, Bound> = {};
  if (path !== "" && s.maxLength !== undefined) out[path] = { maxLength: s.maxLength };
  if (path !== "" && s.maxItems !== undefined) out[path] = { maxItems: s.maxItems };
  for (const [name, child] of Object.entries(s.properties ?? {})) {
    Object.assign(out, boundsOf(child, path === "" ? name : `${path}.${name}`));
  }
  if (s.items !== undefined) Object.assign(out, boundsOf(s.items, `${path}[]`));
  return out;
}

describe("the status bounds are the CRDs'", () => {
  it.each([
    ["Cluster", "liken.sh_clusters.yaml", CLUSTER_STATUS_BOUNDS],
    ["Machine", "liken.sh_machines.yaml", MACHINE_STATUS_BOUNDS],
  ])("%s: every bounded status field, with the same number", (_kind, file, table) => {
    expect({ ...table }).toEqual(boundsOf(statusSchema(file)));
  });

  it("the Machine spec fields `liken rollout resume` writes", () => {
    const spec = boundsOf(statusSchema("liken.sh_machines.yaml", "spec"));
    for (const [path, b] of Object.entries(MACHINE_SPEC_BOUNDS)) expect(spec[path]).toEqual(b);
  });
});

describe("truncate", () => {
  it.each([
    ["short", 10, "short"],
    ["exactly10!", 10, "exactly10!"],
    ["a".repeat(100), 40, `${"a".repeat(15)}… and 85 more characters`],
    ["abcdefghij", 5, "abcd…"],
  ])("%j to %d", (s, max, want) => {
    expect(truncate(s, max)).toBe(want);
    expect(truncate(s, max).length).toBeLessThanOrEqual(max);
  });

  it("never splits a surrogate pair", () => {
    const s = `${"x".repeat(14)}😀${"y".repeat(100)}`;
    const t = truncate(s, 40);
    expect(t.length).toBeLessThanOrEqual(40);
    expect(t.startsWith("x".repeat(14) + "…")).toBe(true);
  });

  it("holds for every length around the tail's size", () => {
    for (let max = 1; max < 80; max++) {
      for (const n of [max, max + 1, max * 3, 10_000]) {
        expect(truncate("z".repeat(n), max).length).toBeLessThanOrEqual(max);
      }
    }
  });
});

describe("joinBounded", () => {
  const names = Array.from({ length: 20 }, (_, i) => `m${String(i).padStart(2, "0")}`);

  it("joins everything that fits", () => {
    expect(joinBounded(["a", "b"], ",", 3)).toBe("a,b");
  });

  it("names the leading items and how many more", () => {
    expect(joinBounded(names, ",", 30)).toBe("m00,m01,m02,m03,… and 16 more");
  });

  it("says only how many when not one name fits", () => {
    expect(joinBounded(["x".repeat(253), "y"], ",", 20)).toBe("… and 2 more");
  });

  it("is never longer than asked, and the count adds up", () => {
    for (let max = 13; max < 120; max++) {
      const s = joinBounded(names, ",", max);
      expect(s.length).toBeLessThanOrEqual(max);
      const m = /… and (\d+) more$/.exec(s);
      const shown = s.split(",").filter((x) => x.startsWith("m")).length;
      expect(shown + Number(m?.[1] ?? 0)).toBe(names.length);
    }
  });
});

describe("boundStatus", () => {
  it("cuts what is over its bound and names the path", () => {
    const status = {
      turns: "t".repeat(5000),
      rebootTurns: Array.from({ length: 1030 }, (_, i) => ({ machine: `m${i}` })),
      conditions: [{ type: "Progressing", message: "p".repeat(40_000) }],
      channel: { handledCheckReleases: "ok" },
      counts: { total: 3 },
    };
    const { status: b, cut } = boundStatus(CLUSTER_STATUS_BOUNDS, status);
    expect(cut.sort()).toEqual(["conditions[].message", "rebootTurns", "turns"]);
    expect(b.turns.length).toBeLessThanOrEqual(4096);
    expect(b.turns.length).toBeGreaterThan(4090);
    expect(b.turns).toMatch(/… and \d+ more characters$/);
    expect(b.rebootTurns).toHaveLength(1024);
    expect(b.rebootTurns[0]).toEqual({ machine: "m0" });
    expect(b.conditions[0]!.message.length).toBeLessThanOrEqual(32768);
    expect(b.channel).toEqual({ handledCheckReleases: "ok" });
    expect(b.counts).toEqual({ total: 3 });
  });

  it("leaves a status within its bounds as it is", () => {
    const status = { lastTrial: { message: "fell back" }, slots: [{ name: "a" }] };
    expect(boundStatus(MACHINE_STATUS_BOUNDS, status)).toEqual({ status, cut: [] });
  });
});

describe("the agent's Event names", () => {
  it("stay a valid name of at most 253 characters for the longest Machine name", async () => {
    const { eventName } = await import("../../src/agent/api.js");
    const longest = `${"a".repeat(60)}.${"b".repeat(60)}.${"c".repeat(60)}.${"d".repeat(60)}.${"e".repeat(9)}`;
    expect(longest).toHaveLength(253);
    const name = eventName(longest, Date.UTC(2026, 11, 4));
    expect(name.length).toBeLessThanOrEqual(253);
    expect(name).toMatch(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/);
    expect(eventName("node-1", 255)).toBe("node-1.ff");
  });
});
