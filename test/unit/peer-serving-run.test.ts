// The agent's peer server follows its plan over real HTTP: serves what the plan names, refuses a
// release as soon as it leaves the plan, and stops listening when the plan says off.
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { ServePlan } from "../../src/agent/peer-serving.js";
import { PeerServingRun, type ResolverOf } from "../../src/agent/peer-serving-run.js";

const A = { version: "2026.10.10-001", digest: `sha256:${"a".repeat(64)}` };
const B = { version: "2026.10.11-001", digest: `sha256:${"b".repeat(64)}` };
const at = { host: "127.0.0.1", port: 0 };
const serve = (...releases: (typeof A)[]): ServePlan => ({
  kind: "serve",
  at,
  releases,
  bytesPerSecond: 64 * 1024 * 1024,
});

let dir: string | undefined;
let run: PeerServingRun | undefined;
afterEach(async () => {
  await run?.stop();
  if (dir !== undefined) await rm(dir, { recursive: true, force: true });
});

async function setUp(): Promise<PeerServingRun> {
  dir = await mkdtemp(path.join(tmpdir(), "liken-peer-run-"));
  const device = path.join(dir, "slot");
  await writeFile(device, Buffer.alloc(8192, 7));
  const resolverOf: ResolverOf = (served) => async (digest) =>
    served(digest)
      ? { device, offset: 0, size: 8192, index: async () => undefined }
      : { refused: "not-trusted", detail: `release ${digest} is not served here` };
  run = new PeerServingRun(resolverOf, "10.0.0.7");
  return run;
}

const get = (url: string, digest: string) =>
  fetch(`${url}v1/releases/${digest.slice(7)}/root`, { headers: { range: "bytes=0-99" } });

describe("PeerServingRun", () => {
  it("serves the plan's releases, narrows at once, stops when off", async () => {
    const r = await setUp();
    expect(r.status()).toBeUndefined();
    await r.apply(serve(A));
    const st = r.status()!;
    expect(st.releases).toEqual([A]);
    expect(st.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/$/);
    expect((await get(st.url, A.digest)).status).toBe(206);
    expect((await get(st.url, B.digest)).status).toBe(403);

    await r.apply(serve(B));
    expect(r.status()).toEqual({ url: st.url, releases: [B] });
    expect((await get(st.url, A.digest)).status).toBe(403);
    expect((await get(st.url, B.digest)).status).toBe(206);

    await r.apply({ kind: "off", reason: "NothingToServe" });
    expect(r.status()).toBeUndefined();
    await expect(get(st.url, B.digest)).rejects.toThrow();
  });

  it("advertises the node's address when it listens on every interface", async () => {
    const r = await setUp();
    await r.apply({ ...serve(A), at: { port: 0 } } as ServePlan);
    expect(r.status()!.url).toMatch(/^http:\/\/10\.0\.0\.7:\d+\/$/);
  });
});
