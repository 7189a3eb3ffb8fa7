// Every peer vanishes mid-download, on the real control plane with the real operator and
// agents: the first machine stages a 6 MiB release from the channel and serves it at the
// Cluster's lowest upload rate (1 MiB/s), the operator assigns it to the second machine, and
// once the first has sent the second more than its one-second burst (its served-bytes metric
// says so: the second is being paced, mid-download) its agent is killed. The second drops the
// gone peer (unreachable, on the chunk where the body broke off), keeps every chunk it had
// received verified, fetches the rest from the channel and stages the release verified.
import { stat } from "node:fs/promises";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { INDEX_CHUNK } from "../../src/verify/chunk-index.js";
import { waitFor } from "../support/kube.js";
import { total } from "../support/metrics.js";
import {
  agentSamples,
  assignmentOf,
  expectReadsBack,
  fileDigest,
  firstServes,
  peerDroppedEvents,
  peersFleet,
  publishRelease,
  releaseOf,
  staged,
} from "./peers-support.js";

const tag = Date.now().toString(36);
const M1 = `pm1-${tag}`;
const M2 = `pm2-${tag}`;
const MiB = 1024 * 1024;
/** The release: 6 MiB of rootfs takes about five seconds at 1 MiB/s after the burst. */
const ROOTFS = 6 * MiB;
/** The Cluster's lowest peer upload rate (the CRD's minimum), so the download takes seconds. */
const RATE = MiB;

describe("every peer vanishes mid-download: the download finishes from the channel", () => {
  const { fleet } = peersFleet({ maxUploadBytesPerSecond: RATE });

  it("keeps what the peer sent, drops it, and fetches the rest from the channel", async () => {
    const v3 = await publishRelease(fleet, "2026.10.12-001", ROOTFS);
    const doc = await releaseOf(fleet, v3);
    const rootfs = doc.artifacts.find((a) => a.name === "rootfs")!;
    const slotSize = 8 * MiB;
    const first = await firstServes(fleet, M1, v3, { slotSize });
    const m2 = await fleet.addMachine({
      name: M2,
      role: "Worker",
      rebootPolicy: "Manual",
      slotSize,
    });
    const assigned = await assignmentOf(fleet, M2, v3);
    expect(assigned.peers).toEqual([first.url]);
    const running = m2.slotFile("a");
    const runningBefore = await fileDigest(running);

    m2.powerOn();
    // Past the bucket's one-second burst: the second machine is receiving, paced, mid-download.
    const servedAtCut = await waitFor(
      "the first machine has sent more than its burst",
      async () => {
        const n = total(await agentSamples(first.machine), "liken_peer_served_bytes_total");
        return n > RATE + MiB / 2 ? n : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 100 },
    );
    expect(servedAtCut).toBeLessThan(ROOTFS);
    // The machine dies at once: its agent and everything in its process group, no restart.
    process.kill(-first.machine.agentPid!, "SIGKILL");
    await first.machine.stop();
    await staged(fleet, M2, v3);

    expect((await fleet.api.machines.get(M2)).status!.staged).toMatchObject({ slot: "b" });
    await expectReadsBack(m2.slotFile("b"), doc);
    expect(await fileDigest(running)).toBe(runningBefore);

    const events = await peerDroppedEvents(M2);
    expect(events).toHaveLength(1);
    const said = /dropped for 2026\.10\.12-001 \(unreachable on chunk (\d+) of rootfs\)/.exec(
      events[0]!.message,
    );
    expect(said, events[0]!.message).not.toBeNull();
    const cut = Number(said![1]);
    // It had received at least a MiB of rootfs from the peer before the cut.
    expect(cut * INDEX_CHUNK).toBeGreaterThan(MiB);

    // The channel sent the rootfs from the cut on, once, and release.yaml: less than a copy.
    const second = fleet.channel!.bytesServed(first.prefix) - first.firstCopy;
    const yaml = 2 * (await stat(path.join(fleet.channelDir, v3.version, "release.yaml"))).size;
    expect(second).toBeGreaterThanOrEqual(rootfs.size - cut * INDEX_CHUNK);
    expect(second).toBeLessThanOrEqual(rootfs.size - cut * INDEX_CHUNK + yaml);
    expect(second).toBeLessThan(first.firstCopy - MiB);

    const m = await agentSamples(m2);
    expect(total(m, "liken_peer_chunks_refused_total", { reason: "unreachable" })).toBe(1);
    expect(total(m, "liken_peer_chunks_refused_total")).toBe(1);
  }, 360_000);
});
