// The daemon serves its peers on the real control plane: with the Cluster's spec.peers on, a
// real agent serves the release it runs verified, its Machine status says where and what, a
// real HTTP range of that release comes back from that URL, and it stops serving (status and
// port) when the Cluster turns peers off.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Machine, ReleaseRef } from "../../src/api/types.js";
import { waitFor } from "../support/kube.js";
import { Fleet } from "./agent-harness.js";

const M = `peer-${Date.now().toString(36)}`;

describe("an agent serves its peers while the Cluster says so", () => {
  const fleet = new Fleet();
  let v1: ReleaseRef;

  beforeAll(async () => {
    await fleet.start(["2026.10.10-001"], { peers: { enabled: true } });
    [v1] = fleet.releases as [ReleaseRef];
    await fleet.addMachine({ name: M, role: "Worker", rebootPolicy: "Auto" });
    fleet.powerOnAll();
  }, 300_000);
  afterAll(async () => {
    await fleet.stop();
  }, 60_000);

  it("says where it serves the running release, serves it, and stops when peers go off", async () => {
    const m = await waitFor(
      "status.peers names the running release",
      async () => {
        const x = await fleet.api.machines.get(M);
        return x.status?.peers?.releases.some((r) => r.digest === v1.digest) ? x : undefined;
      },
      { timeoutMs: 60_000 },
    );
    const peers = (m as Machine).status!.peers!;
    expect(peers.releases).toEqual([v1]);
    expect(peers.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/$/);
    const hex = v1.digest.slice("sha256:".length);
    const ok = await fetch(`${peers.url}v1/releases/${hex}/kernel`, {
      headers: { range: "bytes=0-1023" },
    });
    expect(ok.status).toBe(206);
    expect((await ok.arrayBuffer()).byteLength).toBe(1024);
    const other = await fetch(`${peers.url}v1/releases/${"f".repeat(64)}/kernel`);
    expect(other.status).toBe(403);

    await fleet.api.clusters.patch(fleet.cluster, { spec: { peers: { enabled: false } } });
    await waitFor(
      "status.peers gone",
      async () => (await fleet.api.machines.get(M)).status?.peers === undefined,
      { timeoutMs: 60_000 },
    );
    await expect(fetch(`${peers.url}v1/releases/${hex}/kernel`)).rejects.toThrow();
  }, 180_000);
});
