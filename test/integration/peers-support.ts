// What the peers' integration tests share: a fleet with peers on whose first machine stages the
// new release from the channel and serves it, and the operator's assignment of it to another.
import { afterAll, beforeAll } from "vitest";
import type { Cluster, PeerSource, ReleaseRef } from "../../src/api/types.js";
import type { SimulatedMachine } from "../../src/lab/machine.js";
import { waitFor } from "../support/kube.js";
import { Fleet } from "./agent-harness.js";

export interface PeersFleet {
  fleet: Fleet;
  /** The release the machines move to (set once the fleet started). */
  next: () => ReleaseRef;
}

/**
 * In a describe: a fleet on two releases with peers on and the real operator, started before
 * its tests and stopped after them.
 */
export function peersFleet(): PeersFleet {
  const fleet = new Fleet();
  beforeAll(async () => {
    await fleet.start(["2026.10.10-001", "2026.10.11-001"], { peers: { enabled: true } });
    await fleet.startRealOperator();
  }, 300_000);
  afterAll(async () => {
    await fleet.stop();
  }, 60_000);
  return { fleet, next: () => fleet.releases[1]! };
}

export interface FirstServer {
  machine: SimulatedMachine;
  /** Where it serves (its Machine's status.peers.url). */
  url: string;
  /** The channel's path prefix of the release, and the bytes it sent of it for this copy. */
  prefix: string;
  firstCopy: number;
}

/** `name` joins, the fleet's target becomes `release`, and it stages and serves it. */
export async function firstServes(
  fleet: Fleet,
  name: string,
  release: ReleaseRef,
): Promise<FirstServer> {
  const machine = await fleet.addMachine({ name, role: "Worker", rebootPolicy: "Manual" });
  machine.powerOn();
  await fleet.setTarget(release);
  await waitFor(
    "the first machine serves the new release",
    async () =>
      (await fleet.api.machines.get(name)).status?.peers?.releases.some(
        (r) => r.digest === release.digest,
      ),
    { timeoutMs: 120_000 },
  );
  const url = (await fleet.api.machines.get(name)).status!.peers!.url;
  const prefix = `/${release.version}/`;
  return { machine, url, prefix, firstCopy: fleet.channel!.bytesServed(prefix) };
}

/** The operator's peer assignment of `machine` for `release` (Cluster status.peerSources). */
export async function assignmentOf(
  fleet: Fleet,
  machine: string,
  release: ReleaseRef,
): Promise<PeerSource> {
  return waitFor(
    `the operator assigns peers to ${machine}`,
    async () => {
      const c: Cluster = await fleet.api.clusters.get(fleet.cluster);
      return c.status?.peerSources?.find(
        (s) => s.machine === machine && s.digest === release.digest,
      );
    },
    { timeoutMs: 60_000 },
  );
}

/** Until `machine` has staged `release`. */
export async function staged(fleet: Fleet, machine: string, release: ReleaseRef): Promise<void> {
  await waitFor(
    `${machine} staged the new release`,
    async () => (await fleet.api.machines.get(machine)).status?.staged?.digest === release.digest,
    { timeoutMs: 120_000 },
  );
}
