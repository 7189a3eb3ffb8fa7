// What the integration tier's setup file calls a file's leftover namespace
// (test/support/namespaces.ts, used by test/support/controlplane-lease.ts).
import { describe, expect, it } from "vitest";
import { namespacesOfFile, type NamespaceSeen } from "../support/namespaces.js";

const ns = (name: string, deleting = false): NamespaceSeen => ({ name, deleting });
const before = new Set(["default", "kube-system", "liken-system", "liken-heartbeats"]);

describe("namespacesOfFile", () => {
  it.each([
    { what: "nothing made", now: [ns("default"), ns("liken-system")], left: [], deleting: [] },
    {
      what: "one made and forgotten",
      now: [ns("default"), ns("pdb-1a2b3c")],
      left: ["pdb-1a2b3c"],
      deleting: [],
    },
    {
      what: "one made and being deleted",
      now: [ns("default"), ns("evict-9f", true)],
      left: [],
      deleting: ["evict-9f"],
    },
    {
      what: "a shared one being deleted is not the file's",
      now: [ns("liken-system", true)],
      left: [],
      deleting: [],
    },
    {
      what: "several, sorted",
      now: [ns("z-1"), ns("a-1"), ns("m-1", true), ns("b-1", true)],
      left: ["a-1", "z-1"],
      deleting: ["b-1", "m-1"],
    },
  ])("$what", ({ now, left, deleting }) => {
    expect(namespacesOfFile(before, now)).toEqual({ left, deleting });
  });
});
