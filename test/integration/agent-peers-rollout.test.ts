// A rollout where a machine stages from a peer, on the real control plane with the real
// operator and agents: the first machine stages the new release from the channel and serves
// it; the operator assigns it as the second machine's source (Cluster status.peerSources); the
// second stages the release verified while the channel sends next to nothing of it.
import { describe, expect, it } from "vitest";
import { assignmentOf, firstServes, peersFleet, staged } from "./peers-support.js";

const tag = Date.now().toString(36);
const M1 = `pr1-${tag}`;
const M2 = `pr2-${tag}`;

describe("a rollout where a machine stages from a peer", () => {
  const { fleet, next } = peersFleet();

  it("the second machine's bytes come from the first, not the channel", async () => {
    const v2 = next();
    const first = await firstServes(fleet, M1, v2);
    expect(first.firstCopy).toBeGreaterThan(200 * 1024);

    const m2 = await fleet.addMachine({ name: M2, role: "Worker", rebootPolicy: "Manual" });
    const assigned = await assignmentOf(fleet, M2, v2);
    expect(assigned.peers[0]).toBe(first.url);
    m2.powerOn();
    await staged(fleet, M2, v2);
    const second = fleet.channel!.bytesServed(first.prefix) - first.firstCopy;
    // release.yaml (and at most an index) from the channel; the artifacts from the peer.
    expect(second).toBeLessThan(first.firstCopy / 10);
  }, 360_000);
});
