// The operator's choice of sources per downloading machine: a table of fleets.
import { describe, expect, it } from "vitest";
import { assignSources, type AssignInput } from "../../src/operator/peers/assign.js";

const h = (machine: string, zone?: string) => ({
  machine,
  url: `http://${machine}:7450/`,
  ...(zone ? { zone } : {}),
});
const d = (machine: string, zone?: string) => ({ machine, ...(zone ? { zone } : {}) });

describe("assignSources", () => {
  it.each<[string, AssignInput, unknown[]]>([
    [
      "no holder: a few from the channel, the rest wait",
      {
        downloaders: [d("m1"), d("m2"), d("m3")],
        holders: [],
        channelMachines: 2,
        peersPerMachine: 2,
        perHolder: 10,
      },
      [
        { machine: "m1", source: "channel" },
        { machine: "m2", source: "channel" },
        { machine: "m3", source: "wait" },
      ],
    ],
    [
      "holders: load spread, each machine's main peer the least loaded",
      {
        downloaders: [d("m3"), d("m4"), d("m5"), d("m6")],
        holders: [h("m1"), h("m2")],
        channelMachines: 2,
        peersPerMachine: 2,
        perHolder: 10,
      },
      [
        { machine: "m3", source: "peers", peers: ["http://m1:7450/", "http://m2:7450/"] },
        { machine: "m4", source: "peers", peers: ["http://m2:7450/", "http://m1:7450/"] },
        { machine: "m5", source: "peers", peers: ["http://m1:7450/", "http://m2:7450/"] },
        { machine: "m6", source: "peers", peers: ["http://m2:7450/", "http://m1:7450/"] },
      ],
    ],
    [
      "same zone first, even when loaded",
      {
        downloaders: [d("m3", "z1"), d("m4", "z1"), d("m5", "z2")],
        holders: [h("m1", "z1"), h("m2", "z2")],
        channelMachines: 1,
        peersPerMachine: 2,
        perHolder: 10,
      },
      [
        { machine: "m3", source: "peers", peers: ["http://m1:7450/", "http://m2:7450/"] },
        { machine: "m4", source: "peers", peers: ["http://m1:7450/", "http://m2:7450/"] },
        { machine: "m5", source: "peers", peers: ["http://m2:7450/", "http://m1:7450/"] },
      ],
    ],
    [
      "at least one peer even when asked for none",
      {
        downloaders: [d("m2")],
        holders: [h("m1")],
        channelMachines: 1,
        peersPerMachine: 0,
        perHolder: 1,
      },
      [{ machine: "m2", source: "peers", peers: ["http://m1:7450/"] }],
    ],
    [
      "a tree: each holder serves perHolder machines, the rest wait for the next holder",
      {
        downloaders: [d("m3"), d("m4"), d("m5")],
        holders: [h("m1"), h("m2")],
        channelMachines: 1,
        peersPerMachine: 1,
        perHolder: 2,
        load: { "http://m1:7450/": 2, "http://m2:7450/": 1 },
      },
      [
        { machine: "m3", source: "peers", peers: ["http://m2:7450/"] },
        { machine: "m4", source: "wait" },
        { machine: "m5", source: "wait" },
      ],
    ],
    [
      "a full holder in the same zone gives way to a free one elsewhere",
      {
        downloaders: [d("m3", "z1")],
        holders: [h("m1", "z1"), h("m2", "z2")],
        channelMachines: 1,
        peersPerMachine: 2,
        perHolder: 1,
        load: { "http://m1:7450/": 1 },
      },
      [{ machine: "m3", source: "peers", peers: ["http://m2:7450/", "http://m1:7450/"] }],
    ],
  ])("%s", (_name, input, want) => {
    expect(assignSources(input)).toEqual(want);
  });
});
