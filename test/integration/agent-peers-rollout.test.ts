// A rollout where a machine stages from a peer, on the real control plane with the real
// operator and agents: the first machine stages the new release from the channel and serves
// it; the operator assigns it as the second machine's source (Cluster status.peerSources); the
// second stages the release verified while the channel sends next to nothing of it.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Cluster, ReleaseRef } from "../../src/api/types.js";
import { waitFor } from "../support/kube.js";
import { Fleet } from "./agent-harness.js";

const tag = Date.now().toString(36);
const M1 = `pr1-${tag}`;
const M2 = `pr2-${tag}`;

describe("a rollout where a machine stages from a peer", () => {
  const fleet = new Fleet();
  let v2: ReleaseRef;

  beforeAll(async () => {
    await fleet.start(["2026.10.10-001", "2026.10.11-001"], { peers: { enabled: true } });
    v2 = fleet.releases[1]!;
    await fleet.startRealOperator();
  }, 300_000);
  afterAll(async () => {
    await fleet.stop();
  }, 60_000);

  it("the second machine's bytes come from the first, not the channel", async () => {
    const m1 = await fleet.addMachine({ name: M1, role: "Worker", rebootPolicy: "Manual" });
    m1.powerOn();
    await fleet.setTarget(v2);
    await waitFor(
      "the first machine serves the new release",
      async () =>
        (await fleet.api.machines.get(M1)).status?.peers?.releases.some(
          (r) => r.digest === v2.digest,
        ),
      { timeoutMs: 120_000 },
    );
    const prefix = `/${v2.version}/`;
    const firstCopy = fleet.channel!.bytesServed(prefix);
    expect(firstCopy).toBeGreaterThan(200 * 1024);

    const m2 = await fleet.addMachine({ name: M2, role: "Worker", rebootPolicy: "Manual" });
    const assigned = await waitFor(
      "the operator assigns the first machine to the second",
      async () => {
        const c: Cluster = await fleet.api.clusters.get(fleet.cluster);
        return c.status?.peerSources?.find((s) => s.machine === M2 && s.digest === v2.digest);
      },
      { timeoutMs: 60_000 },
    );
    const m1Url = (await fleet.api.machines.get(M1)).status!.peers!.url;
    expect(assigned.peers[0]).toBe(m1Url);
    m2.powerOn();
    await waitFor(
      "the second machine staged the new release",
      async () => (await fleet.api.machines.get(M2)).status?.staged?.digest === v2.digest,
      { timeoutMs: 120_000 },
    );
    const second = fleet.channel!.bytesServed(prefix) - firstCopy;
    // release.yaml (and at most an index) from the channel; the artifacts from the peer.
    expect(second).toBeLessThan(firstCopy / 10);
  }, 360_000);
});
