// Cluster status.peerSources from the Machines' status: table tests of the pure maker.
import { describe, expect, it } from "vitest";
import { peerSourcesOf, ZONE_LABEL } from "../../src/operator/peers/sources-status.js";
import type { Cluster, Machine, MachineStatus } from "../../src/api/types.js";

const V1 = { version: "2026.10.10-001", digest: `sha256:${"a".repeat(64)}` };
const V2 = { version: "2026.10.11-001", digest: `sha256:${"b".repeat(64)}` };

const cluster = (enabled: boolean): Cluster => ({
  apiVersion: "liken.sh/v1alpha1",
  kind: "Cluster",
  metadata: { name: "lab" },
  spec: { releases: { source: "https://r", catalog: [V1, V2] }, peers: { enabled } },
});
const machine = (name: string, status: MachineStatus): Machine => ({
  apiVersion: "liken.sh/v1alpha1",
  kind: "Machine",
  metadata: { name },
  spec: { cluster: "lab", nodeName: name },
  status,
});
const runsV1 = (name: string) => machine(name, { ...V1 });
const holdsV2 = (name: string, more: Partial<MachineStatus> = {}) =>
  machine(name, {
    ...V1,
    staged: { ...V2, slot: "b", at: "2026-12-04T00:00:00Z" },
    peers: { url: `http://${name}:7450/`, releases: [V1, V2] },
    ...more,
  });
const inZone = (m: Machine, zone: string): Machine => ({
  ...m,
  metadata: { ...m.metadata, labels: { [ZONE_LABEL]: zone } },
});

/** Each machine's Node and its address: m1 at 10.0.0.1, and so on. */
const NODES = new Map(
  [1, 2, 3, 4, 5].map((i) => [`m${i}`, [{ type: "InternalIP", address: `10.0.0.${i}` }]]),
);

describe("peerSourcesOf", () => {
  it("nothing while peers are off or there is no target", () => {
    const ms = [holdsV2("m1"), runsV1("m2")];
    expect(peerSourcesOf(cluster(false), ms, V2, new Set(), NODES)).toBeUndefined();
    expect(peerSourcesOf(cluster(true), ms, undefined, new Set(), NODES)).toBeUndefined();
  });

  it("no holder yet: nobody is listed (the first fetch from the channel)", () => {
    expect(
      peerSourcesOf(cluster(true), [runsV1("m1"), runsV1("m2")], V2, new Set(), NODES),
    ).toBeUndefined();
  });

  it("downloaders get the holder; the holder and a machine that staged it are not listed", () => {
    const staged = machine("m3", {
      ...V1,
      staged: { ...V2, slot: "b", at: "2026-12-04T00:00:00Z" },
    });
    expect(
      peerSourcesOf(cluster(true), [runsV1("m2"), holdsV2("m1"), staged], V2, new Set(), NODES),
    ).toEqual([{ machine: "m2", digest: V2.digest, peers: ["http://10.0.0.1:7450/"] }]);
  });

  it("a holder of another release is no source", () => {
    const other = machine("m1", { ...V1, peers: { url: "http://10.0.0.1:7450/", releases: [V1] } });
    expect(
      peerSourcesOf(cluster(true), [other, runsV1("m2")], V2, new Set(), NODES),
    ).toBeUndefined();
  });

  it.each<[string, Machine, ReadonlySet<string>]>([
    ["judged Lost this pass (no heartbeat)", holdsV2("m1"), new Set(["m1"])],
    ["marked Lost by another copy", holdsV2("m1", { step: "Lost" }), new Set()],
    ["rebooting", holdsV2("m1", { step: "Updating", updateStage: "Rebooting" }), new Set()],
  ])("a holder %s is no source (its status.peers is stale), nor a downloader", (_n, m1, lost) => {
    expect(peerSourcesOf(cluster(true), [m1, runsV1("m2")], V2, lost, NODES)).toBeUndefined();
  });

  it.each<[string, Machine]>([
    ["draining", holdsV2("m1", { step: "Updating", updateStage: "Draining" })],
    ["back on its old slot", holdsV2("m1", { step: "Updating", updateStage: "Rejoining" })],
  ])("a holder %s still serves", (_n, m1) => {
    expect(peerSourcesOf(cluster(true), [m1, runsV1("m2")], V2, new Set(), NODES)).toEqual([
      { machine: "m2", digest: V2.digest, peers: ["http://10.0.0.1:7450/"] },
    ]);
  });

  it("another holder takes the place of one that is down", () => {
    const ms = [holdsV2("m1"), holdsV2("m2"), runsV1("m3")];
    expect(peerSourcesOf(cluster(true), ms, V2, new Set(["m1"]), NODES)).toEqual([
      { machine: "m3", digest: V2.digest, peers: ["http://10.0.0.2:7450/"] },
    ]);
  });

  it("the Machines' zone labels: the holder in the downloader's zone comes first", () => {
    const ms = [
      inZone(holdsV2("m1"), "z-a"),
      inZone(holdsV2("m2"), "z-b"),
      inZone(runsV1("m3"), "z-b"),
      inZone(runsV1("m4"), "z-a"),
      runsV1("m5"),
    ];
    expect(peerSourcesOf(cluster(true), ms, V2, new Set(), NODES)).toEqual([
      {
        machine: "m3",
        digest: V2.digest,
        peers: ["http://10.0.0.2:7450/", "http://10.0.0.1:7450/"],
      },
      {
        machine: "m4",
        digest: V2.digest,
        peers: ["http://10.0.0.1:7450/", "http://10.0.0.2:7450/"],
      },
      // Zoneless: the least loaded first (both serve one), then by name.
      {
        machine: "m5",
        digest: V2.digest,
        peers: ["http://10.0.0.1:7450/", "http://10.0.0.2:7450/"],
      },
    ]);
  });

  it("hands a holder out at its Node's address only, never at the URL its status names", () => {
    // m1 writes a URL of its choosing (an internal service, a name); downloaders get its Node's.
    const liar = holdsV2("m1", {
      peers: { url: "http://10.96.0.1:7450/", releases: [V1, V2] },
    });
    expect(peerSourcesOf(cluster(true), [liar, runsV1("m2")], V2, new Set(), NODES)).toEqual([
      { machine: "m2", digest: V2.digest, peers: ["http://10.0.0.1:7450/"] },
    ]);
    // A Node with no address known: nothing can be tied to it, it serves nobody.
    expect(
      peerSourcesOf(cluster(true), [holdsV2("m1"), runsV1("m2")], V2, new Set(), new Map()),
    ).toBeUndefined();
  });
});
