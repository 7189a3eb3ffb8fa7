// What the peers' integration tests share: a fleet with peers on whose first machine stages the
// new release from the channel and serves it, and the operator's assignment of it to another;
// a larger release published mid-test; what they check afterwards (a slot read back against
// release.yaml, a slot file unchanged, the PeerDropped Events, an agent's metrics).
import { createHash } from "node:crypto";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import { afterAll, beforeAll, expect } from "vitest";
import type { Cluster, PeerSource, PeersSpec, ReleaseRef } from "../../src/api/types.js";
import type { SimulatedMachine } from "../../src/lab/machine.js";
import { filler } from "../../src/lab/releases.js";
import { buildRelease } from "../../src/release/build.js";
import { parseRelease, type Release } from "../../src/verify/release.js";
import { CoreV1Api } from "@kubernetes/client-node";
import { eventsWhere, kubeConfig, waitFor, type EventSeen } from "../support/kube.js";
import { metricsUrlIn, scrape, type Sample } from "../support/metrics.js";
import { Fleet, type FleetMachine } from "./agent-harness.js";

export interface PeersFleet {
  fleet: Fleet;
  /** The release the machines move to (set once the fleet started). */
  next: () => ReleaseRef;
}

/**
 * In a describe: a fleet on two releases with peers on and the real operator, started before
 * its tests and stopped after them. `peers` adds to spec.peers (e.g. a low upload rate).
 */
export function peersFleet(peers: Partial<PeersSpec> = {}): PeersFleet {
  const fleet = new Fleet();
  beforeAll(async () => {
    await fleet.start(["2026.10.10-001", "2026.10.11-001"], {
      peers: { ...peers, enabled: true },
    });
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
  more: Pick<FleetMachine, "slotSize"> = {},
): Promise<FirstServer> {
  const machine = await fleet.addMachine({ name, role: "Worker", rebootPolicy: "Manual", ...more });
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
  try {
    return await waitFor(
      `the operator assigns peers to ${machine}`,
      async () => {
        await fleet.assertOperatorRuns();
        const c: Cluster = await fleet.api.clusters.get(fleet.cluster);
        return c.status?.peerSources?.find(
          (s) => s.machine === machine && s.digest === release.digest,
        );
      },
      // As long as the other waits here: with the integration files in parallel, a new
      // Machine's kwok Node and its address can take most of a minute to reach the operator.
      { timeoutMs: 120_000 },
    );
  } catch (e) {
    throw new Error(`${(e as Error).message}\n${await whatTheOperatorSaw(fleet)}`, { cause: e });
  }
}

/**
 * What an assignment rests on, for a failure's message: each Machine's step and what it
 * serves, its Node's addresses, the Cluster's peerSources, and the operator's last lines.
 */
async function whatTheOperatorSaw(fleet: Fleet): Promise<string> {
  const lines: string[] = [];
  const core = kubeConfig().makeApiClient(CoreV1Api);
  for (const name of fleet.machines.keys()) {
    const m = await fleet.api.machines.get(name).catch((e: unknown) => String(e));
    const node = await core.readNode({ name }).catch((e: unknown) => String(e));
    lines.push(
      `machine ${name}: ${
        typeof m === "string"
          ? m
          : JSON.stringify({
              step: m.status?.step,
              stage: m.status?.updateStage,
              peers: m.status?.peers,
            })
      }; node addresses: ${
        typeof node === "string" ? node : JSON.stringify(node.status?.addresses ?? [])
      }`,
    );
  }
  const c = await fleet.api.clusters.get(fleet.cluster).catch((e: unknown) => String(e));
  lines.push(
    `cluster ${fleet.cluster}: ${
      typeof c === "string"
        ? c
        : JSON.stringify({
            phase: c.status?.phase,
            peerSources: c.status?.peerSources,
            conditions: c.status?.conditions,
          })
    }`,
  );
  lines.push(`the operator's log (${fleet.operatorLog()}), last lines:`);
  lines.push(await fleet.operatorLogTail());
  return lines.join("\n");
}

/** Until `machine` has staged `release`. */
export async function staged(fleet: Fleet, machine: string, release: ReleaseRef): Promise<void> {
  await waitFor(
    `${machine} staged the new release`,
    async () => (await fleet.api.machines.get(machine)).status?.staged?.digest === release.digest,
    { timeoutMs: 120_000 },
  );
}

/** The release's release.yaml as the channel publishes it (artifacts, offsets, digests). */
export async function releaseOf(fleet: Fleet, release: ReleaseRef): Promise<Release> {
  return parseRelease(await readFile(path.join(fleet.channelDir, release.version, "release.yaml")));
}

/** The SHA-256 of a whole file (a slot), to show it did not change. */
export async function fileDigest(file: string): Promise<string> {
  return `sha256:${createHash("sha256")
    .update(await readFile(file))
    .digest("hex")}`;
}

/**
 * Reads every artifact of `release` back from the slot file `device` at its offset, as the
 * agent's slot check does: each must have release.yaml's digest.
 */
export async function expectReadsBack(device: string, release: Release): Promise<void> {
  const bytes = await readFile(device);
  for (const a of release.artifacts) {
    const got = createHash("sha256")
      .update(bytes.subarray(a.offset, a.offset + a.size))
      .digest("hex");
    expect(`sha256:${got}`, `artifact ${a.name} read back from ${device}`).toBe(a.digest);
  }
}

/** The PeerDropped Events on `machine`, once there is one. */
export async function peerDroppedEvents(machine: string): Promise<EventSeen[]> {
  return waitFor(
    `a PeerDropped Event on ${machine}`,
    async () => {
      const items = await eventsWhere(`reason=PeerDropped,involvedObject.name=${machine}`);
      return items.length > 0 ? items : undefined;
    },
    { timeoutMs: 30_000 },
  );
}

/** The agent's metrics now (the newest agent of `machine`: its log names the URL). */
export async function agentSamples(machine: SimulatedMachine): Promise<Sample[]> {
  const url = metricsUrlIn(await readFile(machine.logFile, "utf8"));
  if (url === undefined)
    throw new Error(`${machine.opts.name}: its agent.log names no metrics URL`);
  return scrape(url);
}

/**
 * Publishes `version` in the fleet's channel with a kernel of 64 KiB and a rootfs of `rootfs`
 * bytes, and adds it to the Cluster's catalog (machines need slots that large).
 */
export async function publishRelease(
  fleet: Fleet,
  version: string,
  rootfs: number,
): Promise<ReleaseRef> {
  const src = path.join(fleet.dir, "src", version);
  await mkdir(src, { recursive: true });
  await writeFile(path.join(src, "kernel"), filler(`kernel ${version}`, 64 * 1024));
  await writeFile(path.join(src, "rootfs"), filler(`rootfs ${version}`, rootfs));
  const built = await buildRelease({
    version,
    out: fleet.channelDir,
    artifacts: [
      { name: "kernel", file: path.join(src, "kernel") },
      { name: "rootfs", file: path.join(src, "rootfs") },
    ],
  });
  const r = { version, digest: built.digest };
  fleet.releases.push(r);
  await fleet.api.clusters.patch(fleet.cluster, {
    spec: { releases: { source: fleet.channel!.url, catalog: fleet.releases } },
  });
  return r;
}
