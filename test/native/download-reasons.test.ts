// Static HTTP servers as adopters run them, over real HTTP on loopback (issue 50, parts 2 and 3):
// - one that ignores Range (Python's http.server, some proxies) answers each Range with 200 and
//   the whole file: the download asks once, sees it, says so in one log line (the agent's
//   RangeIgnored Event), and fetches the artifact whole, once; staged and verified;
// - one that answers 404 or 503, or closes every connection: the real download child (the
//   agent's, `liken agent download`) gives up after a bounded number of requests, and the agent
//   puts the reason on the Machine (the status's last problem, the same words as the Event):
//   the URL, the HTTP answer or the failed check, and what to do. Nothing is staged and the
//   running slot is untouched (download-fixtures.ts checks it after each test).
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";
import { pino } from "pino";
import { stringify } from "yaml";
import { beforeAll, describe, expect, it } from "vitest";
import type { AgentApi } from "../../src/agent/api.js";
import { DownloadPart } from "../../src/agent/download-part.js";
import { NO_METER } from "../../src/agent/meter.js";
import type { Problem } from "../../src/agent/status.js";
import type { ApiView } from "../../src/agent/view.js";
import type { Actions } from "../../src/agent/act.js";
import { buildRelease } from "../../src/release/build.js";
import { verifyStagedSlot } from "../../src/slots/check.js";
import { downloadRelease } from "../../src/slots/stage.js";
import { SAMPLE_PAGES } from "../../src/slots/paged-index.js";
import { PAGE_CHUNKS } from "../../src/verify/index-pages.js";
import { INDEX_CHUNK } from "../../src/verify/chunk-index.js";
import { downloadMachines, type DownloadMachine } from "./download-fixtures.js";
import { startFaultServer, type Fault, type FaultServer } from "./fault-server.js";

const MiB = 1024 * 1024;
const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..");
// Two levels under the repository, like src/native/index.ts: the addon is found (build/Release).
const entry = path.join(repo, "build", "liken-test", "agent-reasons.mjs");
const root = mkdtempSync(path.join(tmpdir(), "liken-reasons-"));
const channel = path.join(root, "channel");
// More pages than one sample step, so that the sample of the index pages is more than one
// request (pages 0 and 32): a server that ignores Range must still be asked only once.
const PAGE_BYTES = PAGE_CHUNKS * INDEX_CHUNK;
const v1 = randomBytes((SAMPLE_PAGES + 2) * PAGE_BYTES);
const v2 = Buffer.from(v1);
randomBytes(3 * INDEX_CHUNK).copy(v2, 10 * INDEX_CHUNK);
const releases: Record<string, string> = {};
let server: FaultServer;
/** Every file of 2.0 but release.yaml: the top index, pages, plain index, pack, artifact. */
const files2 = ["", ".lktop", ".lkpages", ".lkidx", ".lkpack"].map((x) => `/2.0/2.0.img${x}`);

beforeAll(async () => {
  // The child the agent starts, bundled once (tsx would compile it at every spawn).
  await build({
    entryPoints: [path.join(repo, "test", "native", "agent-entry.ts")],
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    packages: "external",
    outfile: entry,
    logLevel: "error",
  });
  for (const [v, bytes] of [
    ["1.0", v1],
    ["2.0", v2],
  ] as const) {
    const file = path.join(root, `${v}.img`);
    writeFileSync(file, bytes);
    releases[v] = (
      await buildRelease({ version: v, out: channel, artifacts: [{ name: "rootfs", file }] })
    ).digest;
  }
  server = await startFaultServer(channel);
}, 120_000);

const newMachine = downloadMachines(root, {
  server: () => server,
  request: () => ({ version: "2.0", digest: releases["2.0"]!, fetch: { idleTimeoutMs: 2000 } }),
});

/**
 * Slot a runs 1.0 as a machine installed by the guide: its release.yaml recorded, no index kept
 * (the adopter's state partition held only marker.json and release.yaml).
 */
async function machine(): Promise<DownloadMachine> {
  const a = Buffer.alloc(v1.length + MiB);
  v1.copy(a);
  const m = newMachine({ a, b: v1.length + MiB });
  mkdirSync(m.store.dir("a"), { recursive: true });
  await m.store.writeRelease("a", readFileSync(path.join(channel, "1.0", "release.yaml")));
  return m;
}

const to2 = () => server.log.filter((r) => r.path.startsWith("/2.0/"));

async function expectStaged(m: DownloadMachine): Promise<void> {
  expect((await m.store.marker("b")).state).toBe("staged");
  expect(await verifyStagedSlot(m.config)).toMatchObject({ ok: true, version: "2.0" });
  expect(readFileSync(m.b).subarray(0, v2.length).equals(v2)).toBe(true);
}

describe("a server that ignores Range", () => {
  it("is asked for a range once, and the artifact comes whole, once (Python's http.server)", async () => {
    const m = await machine();
    for (const f of files2) server.faults.set(f, { ignoreRange: true });
    await downloadRelease(m.req());
    await expectStaged(m);
    const ranged = to2().filter((r) => r.range !== undefined);
    // One range asked (the first sampled page), answered 200: no second, no storm.
    expect(ranged.map((r) => [r.path, r.status])).toEqual([["/2.0/2.0.img.lkpages", 200]]);
    // The artifact once, without a range; neither the plain index nor the pack.
    expect(to2().filter((r) => r.path === "/2.0/2.0.img")).toEqual([
      { path: "/2.0/2.0.img", range: undefined, status: 200 },
    ]);
    expect(to2().map((r) => r.path)).toEqual([
      "/2.0/release.yaml",
      "/2.0/2.0.img.lktop",
      "/2.0/2.0.img.lkpages",
      "/2.0/2.0.img",
    ]);
    const said = m.messages.filter((x) => x.startsWith("range-ignored: "));
    expect(said).toHaveLength(1);
    expect(said[0]).toMatch(
      /^range-ignored: GET http:\/\/127\.0\.0\.1:\d+\/2\.0\/2\.0\.img\.lkpages: the server ignored Range \(HTTP 200 to bytes=\d+-\d+\); every artifact is fetched whole, once\. A server that answers Range with 206 \(liken channel serve/,
    );
  });

  it("on the pack and artifact only (a proxy): one more range, then the rest whole", async () => {
    const m = await machine();
    server.faults.set("/2.0/2.0.img.lkpack", { ignoreRange: true });
    server.faults.set("/2.0/2.0.img", { ignoreRange: true });
    await downloadRelease(m.req());
    await expectStaged(m);
    // The pack's first range tells; the artifact is then asked once, from the last durable
    // byte (a 200 that the writer skips to it), not first by a plain range.
    expect(to2().filter((r) => r.path === "/2.0/2.0.img.lkpack")).toHaveLength(1);
    const whole = to2().filter((r) => r.path === "/2.0/2.0.img");
    expect(whole).toHaveLength(1);
    expect(whole[0]!.range ?? "bytes=0-").toMatch(/^bytes=\d+-$/);
    expect(m.messages.filter((x) => x.startsWith("range-ignored: "))).toHaveLength(1);
  });
});

/** The agent's download part, as the daemon wires it, starting the real child. */
function agentDownload(m: DownloadMachine): {
  ended: Promise<Problem | undefined>;
  part: DownloadPart;
} {
  const config = path.join(path.dirname(m.b), "agent.yaml");
  writeFileSync(
    config,
    stringify({
      slots: { a: { device: "a.img" }, b: { device: "b.img" } },
      running: "a",
      stateDir: "state",
    }),
  );
  let done: (p: Problem | undefined) => void = () => {};
  const ended = new Promise<Problem | undefined>((r) => (done = r));
  let problem: Problem | undefined;
  const part = new DownloadPart({
    entry,
    machine: `m${m.n}`,
    meter: NO_METER,
    log: pino({ level: "silent" }),
    // No Machine in the view (no control plane in this tier): the Event is not sent; its
    // message is the status's, built once (download-part.ts ended()).
    api: {} as AgentApi,
    view: { machine: undefined } as unknown as ApiView,
    actions: () => ({}) as Actions,
    problem: (p) => (problem = p),
    wake: () => done(problem),
  });
  part.supervisor.start(
    {
      config,
      source: server.url,
      release: { version: "2.0", digest: releases["2.0"]! },
      running: "a",
    },
    "b",
    v2.length,
  );
  return { ended, part };
}

describe("a server that fails: the reason on the Machine, a bounded number of requests", () => {
  it.each<[string, Fault, RegExp, number]>([
    [
      "404",
      { status: 404 },
      /^download of 2\.0 into slot b failed: artifact rootfs: GET http:\/\/127\.0\.0\.1:\d+\/2\.0\/2\.0\.img: HTTP 404; check the source URL .* \[LIKEN_VERIFY_HTTP_STATUS\]; what to do: check that the Cluster's spec\.releases\.source is the channel's base URL/,
      // release.yaml, the top index (refused: the plain index), the plain index (refused: the
      // whole artifact), the artifact: a 404 is not retried.
      4,
    ],
    [
      "503",
      { status: 503 },
      /^download of 2\.0 into slot b failed: artifact rootfs: GET http:\/\/127\.0\.0\.1:\d+\/2\.0\/2\.0\.img: HTTP 503; the server failed; check its log.* \[LIKEN_VERIFY_HTTP_STATUS\]; what to do: check the channel server's own log/,
      // The same, and the artifact five times (DEFAULT_ATTEMPTS, with backoff).
      8,
    ],
    [
      "every connection closed",
      { drop: { after: 0, times: 1000 } },
      /^download of 2\.0 into slot b failed: artifact rootfs: GET http:\/\/127\.0\.0\.1:\d+\/2\.0\/2\.0\.img: .* \[LIKEN_VERIFY_CONNECTION\]; what to do: check that the channel server is up and that this machine reaches it/,
      8,
    ],
  ])("%s", async (_name, fault, reason, requests) => {
    const m = await machine();
    for (const f of files2) server.faults.set(f, fault);
    const { ended, part } = agentDownload(m);
    const problem = await ended;
    expect(problem?.reason).toBe("DownloadFailed");
    expect(problem?.message).toMatch(reason);
    expect(problem?.message).toMatch(
      /nothing is staged until every artifact verifies, the running slot is untouched; next attempt in 60 s$/,
    );
    // Whole in the Event too: the API takes an Event's message up to 1 KiB (agent/api.ts).
    expect(problem!.message.length).toBeLessThan(1024);
    expect(part.supervisor.failures).toBe(1);
    expect(to2()).toHaveLength(requests);
    expect((await m.store.marker("b")).state).not.toBe("staged");
  });
});

describe("a download that makes no progress (the adopter's 37 minutes at 0 %)", () => {
  it("is stopped as a failure that names its last step, not only 'retrying later'", async () => {
    const m = await machine();
    // Headers, then silence: the child waits on the top index as it waited on the slot.
    for (const f of files2) server.faults.set(f, { stallFromRequest: 1 });
    const { ended, part } = agentDownload(m);
    await waitUntil(() => to2().some((r) => r.path === "/2.0/2.0.img.lktop"));
    // What the daemon does when towards.ts decides cancel-download (failed: true).
    part.supervisor.failed();
    await part.supervisor.stop();
    const problem = await ended;
    expect(problem?.reason).toBe("DownloadStalled");
    expect(problem?.message).toMatch(
      /^download of 2\.0 into slot b made no progress for \d+ s and was stopped; its last line: write: begin; what to do: the agent's log has every step: journalctl -u liken-agent on the machine, or its serial console; .* next attempt in 60 s$/,
    );
    expect(part.supervisor.failures).toBe(1);
    expect((await m.store.marker("b")).state).not.toBe("staged");
  });
});

async function waitUntil(ok: () => boolean, ms = 20_000): Promise<void> {
  const until = Date.now() + ms;
  while (!ok()) {
    if (Date.now() > until) throw new Error("timed out");
    await new Promise((r) => setTimeout(r, 20));
  }
}
