// Every peer gone, on the real control plane with the real operator and agents: the operator
// assigned the first machine as the second's source, then the first machine went down (its
// stale status still names it). The second machine drops the peer, says so in a PeerDropped
// Event, and stages the release verified from the channel.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Cluster, ReleaseRef } from "../../src/api/types.js";
import { kubectl, waitFor } from "../support/kube.js";
import { Fleet } from "./agent-harness.js";

const tag = Date.now().toString(36);
const M1 = `pv1-${tag}`;
const M2 = `pv2-${tag}`;

describe("every peer vanishes: the download finishes from the channel", () => {
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

  it("drops the gone peer, reports it, and stages from the channel", async () => {
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
    const url = (await fleet.api.machines.get(M1)).status!.peers!.url;
    const prefix = `/${v2.version}/`;
    const firstCopy = fleet.channel!.bytesServed(prefix);
    const m2 = await fleet.addMachine({ name: M2, role: "Worker", rebootPolicy: "Manual" });
    await waitFor(
      "the operator assigns the first machine to the second",
      async () => {
        const c: Cluster = await fleet.api.clusters.get(fleet.cluster);
        return c.status?.peerSources?.find((s) => s.machine === M2 && s.peers[0] === url);
      },
      { timeoutMs: 60_000 },
    );
    await m1.stop();
    m2.powerOn();
    await waitFor(
      "the second machine staged the new release",
      async () => (await fleet.api.machines.get(M2)).status?.staged?.digest === v2.digest,
      { timeoutMs: 120_000 },
    );
    expect(fleet.channel!.bytesServed(prefix) - firstCopy).toBeGreaterThan(firstCopy * 0.9);
    const events = await waitFor(
      "a PeerDropped Event on the second machine",
      async () => {
        const r = await kubectl([
          "get",
          "events",
          "-n",
          "default",
          "--field-selector",
          `reason=PeerDropped,involvedObject.name=${M2}`,
          "-o",
          "json",
        ]);
        const items = (JSON.parse(r.stdout) as { items: { message: string }[] }).items;
        return items.length > 0 ? items : undefined;
      },
      { timeoutMs: 30_000 },
    );
    expect(events[0]!.message).toContain(`peer ${url} dropped for ${v2.version} (unreachable)`);
  }, 360_000);
});
