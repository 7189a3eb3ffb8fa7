// A rebuilt release under the same version, on the real control plane with the real operator
// and agent. The API server refuses the digest change in one edit (api-crd.test.ts); removed
// in one edit and added back in the next, it gets through. Then a machine that runs that
// version must neither stage the rebuild nor ask for a turn the operator never grants while
// the Cluster reads Ready: it reads Ready itself and says, in UpToDate, which digest it runs,
// which the catalog names, and what to do (docs/adr/catalog-digest-immutable.md).
import { cp, mkdir, writeFile } from "node:fs/promises";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ReleaseRef } from "../../src/api/types.js";
import { filler } from "../../src/lab/releases.js";
import { buildRelease } from "../../src/release/build.js";
import { waitFor } from "../support/kube.js";
import { Fleet } from "./agent-harness.js";

const M = `same-${Date.now().toString(36)}`;

/** The channel's release of `version` built again with other bytes: a new digest. */
async function rebuild(fleet: Fleet, version: string): Promise<ReleaseRef> {
  const src = path.join(fleet.dir, "rebuild", version);
  await mkdir(src, { recursive: true });
  await writeFile(path.join(src, "kernel"), filler(`kernel ${version} rebuilt`, 64 * 1024));
  await writeFile(path.join(src, "rootfs"), filler(`rootfs ${version} rebuilt`, 192 * 1024));
  // liken's builder refuses to overwrite a published release; a publisher that replaces one
  // by hand is what this scenario is about.
  const out = path.join(fleet.dir, "rebuild", "channel");
  const built = await buildRelease({
    version,
    out,
    artifacts: [
      { name: "kernel", file: path.join(src, "kernel") },
      { name: "rootfs", file: path.join(src, "rootfs") },
    ],
  });
  await cp(path.join(out, version), path.join(fleet.channelDir, version), {
    recursive: true,
    force: true,
  });
  return { version, digest: built.digest };
}

describe("the running version's catalog entry replaced with a rebuild", () => {
  const fleet = new Fleet();
  let v1: ReleaseRef;

  beforeAll(async () => {
    await fleet.start(["2026.10.10-001"]);
    [v1] = fleet.releases as [ReleaseRef];
    await fleet.addMachine({ name: M, role: "Worker", rebootPolicy: "Auto" });
    await fleet.startRealOperator();
    fleet.powerOnAll();
    await fleet.waitAll(
      "the machine runs the release",
      (m) => m.status?.step === "Ready" && m.status.version === v1.version,
    );
  }, 300_000);
  afterAll(async () => {
    await fleet.stop();
  }, 60_000);

  it("the machine stays Ready, asks for no turn, and says which digests differ", async () => {
    const rebuilt = await rebuild(fleet, v1.version);
    expect(rebuilt.digest).not.toBe(v1.digest);
    // Two edits: no target and no entry, then the entry back with the rebuild's digest.
    await fleet.api.clusters.patch(fleet.cluster, {
      spec: { version: null, releases: { catalog: [] } },
    });
    const edited = Date.now();
    await fleet.api.clusters.patch(fleet.cluster, {
      spec: { version: v1.version, releases: { catalog: [rebuilt] } },
    });

    const upToDate = await waitFor(
      "UpToDate names both digests",
      async () => {
        const m = await fleet.api.machines.get(M);
        const c = m.status?.conditions?.find((x) => x.type === "UpToDate");
        if (
          m.status?.target?.digest === rebuilt.digest &&
          c?.reason === "RunsTargetVersionOtherDigest"
        )
          return c;
        // Said on timeout: what the machine does instead (the bug: UpdatePending, asking).
        const s = m.status;
        throw new Error(
          `step ${s?.step}, turnRequest ${JSON.stringify(s?.turnRequest)}, UpToDate ${c?.reason}`,
        );
      },
      { timeoutMs: 60_000, intervalMs: 300 },
    );
    expect(upToDate.status).toBe("True");
    expect(upToDate.message).toContain(
      `runs ${v1.version} as built with digest ${v1.digest}; the catalog now names ${rebuilt.digest}`,
    );
    expect(upToDate.message).toContain("publish a rebuild under a new version");
    const m = await fleet.api.machines.get(M);
    expect(m.status).toMatchObject({ step: "Ready", version: v1.version, digest: v1.digest });
    expect(m.status?.turnRequest).toBeUndefined();
    // Since the edit it never left Ready, staged nothing and asked for nothing.
    const since = fleet.machineHistory(M).filter((h) => h.at >= edited);
    expect(since.map((h) => h.step).filter((s) => s !== "Ready")).toEqual([]);
    expect(since.flatMap((h) => (h.turnRequest ? [h.turnRequest] : []))).toEqual([]);
    // And the operator agrees: the Cluster, as of this spec, reads Ready with no turn.
    const phase = await waitFor(
      "the operator's status for the edited Cluster",
      async () => {
        const c = await fleet.api.clusters.get(fleet.cluster);
        return c.status?.observedGeneration === c.metadata.generation ? c.status : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 300 },
    );
    expect(phase).toMatchObject({ phase: "Ready" });
    expect(phase.rebootTurns ?? []).toEqual([]);
  }, 120_000);
});
