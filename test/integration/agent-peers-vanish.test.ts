// Every peer gone, on the real control plane with the real operator and agents: the operator
// assigned the first machine as the second's source, then the first machine went down (its
// stale status still names it). The second machine drops the peer, says so in a PeerDropped
// Event, and stages the release verified from the channel.
import { describe, expect, it } from "vitest";
import { eventsWhere, waitFor } from "../support/kube.js";
import { assignmentOf, firstServes, peersFleet, staged } from "./peers-support.js";

const tag = Date.now().toString(36);
const M1 = `pv1-${tag}`;
const M2 = `pv2-${tag}`;

describe("every peer vanishes: the download finishes from the channel", () => {
  const { fleet, next } = peersFleet();

  it("drops the gone peer, reports it, and stages from the channel", async () => {
    const v2 = next();
    const first = await firstServes(fleet, M1, v2);
    const m2 = await fleet.addMachine({ name: M2, role: "Worker", rebootPolicy: "Manual" });
    const assigned = await assignmentOf(fleet, M2, v2);
    expect(assigned.peers[0]).toBe(first.url);
    await first.machine.stop();
    m2.powerOn();
    await staged(fleet, M2, v2);
    expect(fleet.channel!.bytesServed(first.prefix) - first.firstCopy).toBeGreaterThan(
      first.firstCopy * 0.9,
    );
    const events = await waitFor(
      "a PeerDropped Event on the second machine",
      async () => {
        const items = await eventsWhere(`reason=PeerDropped,involvedObject.name=${M2}`);
        return items.length > 0 ? items : undefined;
      },
      { timeoutMs: 30_000 },
    );
    expect(events[0]!.message).toContain(
      `peer ${first.url} dropped for ${v2.version} (unreachable`,
    );
  }, 360_000);
});
