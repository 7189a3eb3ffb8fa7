// Cluster status.peerSources from the Machines' status: table tests of the pure maker.
import { describe, expect, it } from "vitest";
import { peerSourcesOf } from "../../src/operator/peer-sources-status.js";
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
const holdsV2 = (name: string) =>
  machine(name, {
    ...V1,
    staged: { ...V2, slot: "b", at: "2026-12-04T00:00:00Z" },
    peers: { url: `http://${name}:7450/`, releases: [V1, V2] },
  });

describe("peerSourcesOf", () => {
  it("nothing while peers are off or there is no target", () => {
    const ms = [holdsV2("m1"), runsV1("m2")];
    expect(peerSourcesOf(cluster(false), ms, V2)).toBeUndefined();
    expect(peerSourcesOf(cluster(true), ms, undefined)).toBeUndefined();
  });

  it("no holder yet: nobody is listed (the first fetch from the channel)", () => {
    expect(peerSourcesOf(cluster(true), [runsV1("m1"), runsV1("m2")], V2)).toBeUndefined();
  });

  it("downloaders get the holder; the holder and a machine that staged it are not listed", () => {
    const staged = machine("m3", {
      ...V1,
      staged: { ...V2, slot: "b", at: "2026-12-04T00:00:00Z" },
    });
    expect(peerSourcesOf(cluster(true), [runsV1("m2"), holdsV2("m1"), staged], V2)).toEqual([
      { machine: "m2", digest: V2.digest, peers: ["http://m1:7450/"] },
    ]);
  });

  it("a holder of another release is no source", () => {
    const other = machine("m1", { ...V1, peers: { url: "http://m1:7450/", releases: [V1] } });
    expect(peerSourcesOf(cluster(true), [other, runsV1("m2")], V2)).toBeUndefined();
  });
});
