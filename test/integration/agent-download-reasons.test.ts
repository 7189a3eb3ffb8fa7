// A channel server that fails, then one that ignores Range, on the real control plane with the
// real agent (issue 50, "The reason on the Machine"): each failed download is a DownloadFailed
// Event and the Machine's ReleaseStaged condition, both naming the URL, the HTTP answer and
// what to do; the agent tries again a bounded number of times, backing off; the running slot
// is never written. Once the server answers (ignoring Range, as Python's http.server does) the
// release stages verified.
import { createHash } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ReleaseRef } from "../../src/api/types.js";
import { eventsWhere, waitFor } from "../support/kube.js";
import { startFaultServer, type FaultServer } from "../native/fault-server.js";
import { Fleet } from "./agent-harness.js";

const M = `reasons-${Date.now().toString(36)}`;
const sha = (f: string) => createHash("sha256").update(readFileSync(f)).digest("hex");

describe("a failing channel: the reason on the Machine", () => {
  const fleet = new Fleet();
  let server: FaultServer;
  let v1: ReleaseRef, v2: ReleaseRef;

  beforeAll(async () => {
    await fleet.start(["2026.12.05-001", "2026.12.12-001"]);
    [v1, v2] = fleet.releases as [ReleaseRef, ReleaseRef];
    server = await startFaultServer(fleet.channelDir);
    await fleet.addMachine({ name: M, role: "Worker", rebootPolicy: "Manual" });
    fleet.powerOnAll();
    await fleet.waitAll(
      "the machine runs the first release",
      (m) => m.status?.version === v1.version,
    );
  }, 300_000);
  afterAll(async () => {
    await fleet.stop();
    await server.close();
  }, 60_000);

  it("says why in an Event and the status, backs off, and stages once the server answers", async () => {
    const running = sha(fleet.machines.get(M)!.slotFile("a"));
    // Every file of the release but release.yaml answers 503.
    const prefix = `/${v2.version}/`;
    const files = readdirSync(path.join(fleet.channelDir, v2.version))
      .filter((f) => f !== "release.yaml")
      .map((f) => `${prefix}${f}`);
    for (const f of files) server.faults.set(f, { status: 503 });
    const served = (): number => server.log.filter((r) => files.includes(r.path)).length;
    await fleet.api.clusters.patch(fleet.cluster, {
      spec: { releases: { source: server.url, catalog: fleet.releases } },
    });
    await fleet.setTarget(v2);
    const failed = await waitFor(
      "two DownloadFailed Events",
      async () => {
        const items = await eventsWhere(`reason=DownloadFailed,involvedObject.name=${M}`);
        return items.length >= 2 ? items : undefined;
      },
      { timeoutMs: 120_000 },
    );
    const url = server.url.replace(/[.]/g, "\\.");
    expect(failed[0]!.message).toMatch(
      new RegExp(
        `^download of ${v2.version.replace(/[.]/g, "\\.")} into slot b failed: artifact \\w+: GET ${url}/.*: HTTP 503; .*\\[LIKEN_VERIFY_HTTP_STATUS\\]; what to do: check the channel server's own log`,
      ),
    );
    // The harness's downloadRetryMs is 2 s: 2 s after the first failure, 4 s after the second.
    const said = failed.map((e) => e.message).join("\n");
    expect(said).toMatch(/next attempt in 2 s$/m);
    expect(said).toMatch(/next attempt in 4 s \(2 failures in a row\)$/m);
    const m = await fleet.api.machines.get(M);
    const staged = m.status?.conditions?.find((c) => c.type === "ReleaseStaged");
    expect(staged).toMatchObject({ status: "False", reason: "DownloadFailed" });
    expect(staged!.message).toMatch(/HTTP 503; .*what to do: /);
    // Bounded: an attempt asks for the top index and the plain index once each, and at most 5
    // times for the artifact (DEFAULT_ATTEMPTS); attempts back off. One more may be under way.
    expect(served()).toBeLessThanOrEqual(7 * (failed.length + 1));

    // The server comes back as Python's http.server: 200 and the whole file to every Range.
    for (const f of files) server.faults.set(f, { ignoreRange: true });
    await waitFor(
      "the release staged",
      async () => {
        const s = (await fleet.api.machines.get(M)).status;
        return s?.conditions?.find((c) => c.type === "ReleaseStaged")?.status === "True";
      },
      { timeoutMs: 120_000 },
    );
    expect(sha(fleet.machines.get(M)!.slotFile("a"))).toBe(running);
  }, 300_000);
});
