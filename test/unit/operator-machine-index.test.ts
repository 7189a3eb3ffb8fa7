// The Machines of each Cluster as the watch keeps them (src/operator/run/machine-index.ts): a pass
// reads its Cluster's Machines with no copy when none changed, a fresh array when one did.
import { describe, expect, it } from "vitest";
import type { Machine } from "../../src/api/index.js";
import { MachineIndex } from "../../src/operator/run/machine-index.js";

const machine = (name: string, cluster: string, rv = "1"): Machine =>
  ({
    apiVersion: "liken.sh/v1alpha1",
    kind: "Machine",
    metadata: { name, resourceVersion: rv },
    spec: { cluster, nodeName: name },
  }) as Machine;
const names = (ms: readonly Machine[]): string[] => ms.map((m) => m.metadata.name).sort();

describe("machine index: a Cluster's Machines, copied only on change", () => {
  it("the same array while nothing changed; a new one, with the change, after", () => {
    const ix = new MachineIndex();
    ix.set(machine("a", "c"));
    ix.set(machine("b", "c"));
    const first = ix.of("c");
    expect(names(first)).toEqual(["a", "b"]);
    expect(ix.of("c")).toBe(first); // a quiet pass: no copy
    const b2 = machine("b", "c", "2");
    ix.set(b2);
    const second = ix.of("c");
    expect(second).not.toBe(first);
    expect(second).toContain(b2);
    // The array handed out before is never changed: a running decision keeps its view.
    expect(first.find((m) => m.metadata.name === "b")?.metadata.resourceVersion).toBe("1");
  });

  it.each([
    {
      name: "a Machine moved to another Cluster leaves the first",
      steps: (ix: MachineIndex) => {
        ix.set(machine("a", "c"));
        ix.set(machine("a", "d"));
      },
      want: { c: [], d: ["a"] },
    },
    {
      name: "a deleted Machine leaves its Cluster",
      steps: (ix: MachineIndex) => {
        ix.set(machine("a", "c"));
        ix.set(machine("b", "c"));
        ix.delete(machine("a", "c"));
      },
      want: { c: ["b"], d: [] },
    },
    {
      name: "a list replaces everything (a Machine gone while the watch was down is gone)",
      steps: (ix: MachineIndex) => {
        ix.set(machine("a", "c"));
        ix.set(machine("b", "d"));
        ix.sync([machine("b", "c", "5")]);
      },
      want: { c: ["b"], d: [] },
    },
  ])("$name", ({ steps, want }) => {
    const ix = new MachineIndex();
    steps(ix);
    expect(names(ix.of("c"))).toEqual(want.c);
    expect(names(ix.of("d"))).toEqual(want.d);
  });
});
