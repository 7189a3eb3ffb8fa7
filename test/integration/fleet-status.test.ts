// `liken fleet status` and `liken rollout pause|resume --contexts` against the real API
// server, through a kubeconfig of 50 contexts: most point at the test control plane, some at
// a port nobody listens on (refused at once) and some at a server that accepts connections and
// never answers (only the per-context deadline ends them). The command must answer within 5 s
// with a row per context, the dead ones saying so; pause and resume must name what they
// reached and exit non-zero when a context was not reached.
import net from "node:net";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { Command } from "commander";
import { stringify } from "yaml";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { LABEL_RING, LikenApi, type Cluster } from "../../src/api/index.js";
import { registerFleet } from "../../src/cli/commands/fleet.js";
import { registerRollout } from "../../src/cli/commands/rollout.js";
import { freePort } from "../../src/controlplane/ports.js";
import { clusterObject, VERSION_A } from "../support/clusters.js";
import { kubeConfig, uniqueName } from "../support/kube.js";

const api = new LikenApi(kubeConfig());
const suffix = uniqueName("fleet");
/** Selects this file's Clusters only: the control plane is shared with other test files. */
const SELECTOR = `liken-test/fleet=${suffix}`;
const CANARY = `${suffix}-canary`;
const BROAD = `${suffix}-broad`;
const LIVE = 45;
const REFUSED = 3;
const SILENT = 2;
let dir: string;
let kubeconfig: string;
let silent: net.Server;
const held: net.Socket[] = [];
const cleanup: (() => Promise<unknown>)[] = [];

function clusterWithRing(name: string, ring: string): Cluster {
  const c = clusterObject(name);
  c.metadata.labels = { [LABEL_RING]: ring, "liken-test/fleet": suffix };
  return c;
}

async function machine(name: string, cluster: string, version?: string): Promise<void> {
  await api.machines.create({
    apiVersion: "liken.sh/v1alpha1",
    kind: "Machine",
    metadata: { name },
    spec: { cluster, nodeName: name },
  });
  cleanup.push(() => api.machines.delete(name));
  if (version !== undefined) await api.machines.patchStatus(name, { status: { version } });
}

/** The test control plane's kubeconfig, with `n` contexts per kind of server. */
function manyContexts(deadPort: number, silentPort: number): object {
  const kc = kubeConfig();
  const cluster = kc.getCurrentCluster()!;
  const user = kc.getCurrentUser()!;
  const clusterEntry = (name: string, server: string) => ({
    name,
    cluster: {
      server,
      ...(cluster.caData ? { "certificate-authority-data": cluster.caData } : {}),
      ...(cluster.caFile ? { "certificate-authority": cluster.caFile } : {}),
    },
  });
  const userEntry = {
    name: "admin",
    user: {
      ...(user.certData ? { "client-certificate-data": user.certData } : {}),
      ...(user.keyData ? { "client-key-data": user.keyData } : {}),
      ...(user.certFile ? { "client-certificate": user.certFile } : {}),
      ...(user.keyFile ? { "client-key": user.keyFile } : {}),
      ...(user.token ? { token: user.token } : {}),
    },
  };
  const contexts: { name: string; context: { cluster: string; user: string } }[] = [];
  for (let i = 0; i < LIVE; i++)
    contexts.push({ name: `live-${i}`, context: { cluster: "live", user: "admin" } });
  for (let i = 0; i < REFUSED; i++)
    contexts.push({ name: `refused-${i}`, context: { cluster: "refused", user: "admin" } });
  for (let i = 0; i < SILENT; i++)
    contexts.push({ name: `silent-${i}`, context: { cluster: "silent", user: "admin" } });
  return {
    apiVersion: "v1",
    kind: "Config",
    clusters: [
      clusterEntry("live", cluster.server),
      clusterEntry("refused", `https://127.0.0.1:${deadPort}`),
      clusterEntry("silent", `https://127.0.0.1:${silentPort}`),
    ],
    users: [userEntry],
    contexts,
    "current-context": "live-0",
  };
}

interface Ran {
  stdout: string;
  ms: number;
  error?: unknown;
}

/** Runs a `liken` command in this process (a spawned CLI mostly measures its own start-up). */
async function liken(args: string[]): Promise<Ran> {
  const out: string[] = [];
  vi.spyOn(process.stdout, "write").mockImplementation((s) => out.push(String(s)) > 0);
  const program = new Command("liken").exitOverride();
  registerFleet(program);
  registerRollout(program);
  const t0 = performance.now();
  let error: unknown;
  try {
    await program.parseAsync(["node", "liken", ...args, "--kubeconfig", kubeconfig]);
  } catch (e) {
    error = e;
  } finally {
    vi.restoreAllMocks();
  }
  return { stdout: out.join(""), ms: performance.now() - t0, error };
}

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), "liken-fleet-"));
  silent = net.createServer((s) => held.push(s));
  await new Promise<void>((r) => silent.listen(0, "127.0.0.1", r));
  const silentPort = (silent.address() as net.AddressInfo).port;
  const deadPort = await freePort();
  kubeconfig = path.join(dir, "kubeconfig");
  await writeFile(kubeconfig, stringify(manyContexts(deadPort, silentPort)));
  await api.clusters.create(clusterWithRing(CANARY, "canary"));
  cleanup.push(() => api.clusters.delete(CANARY));
  await api.clusters.create(clusterWithRing(BROAD, "broad"));
  cleanup.push(() => api.clusters.delete(BROAD));
  await machine(`${CANARY}-m1`, CANARY, VERSION_A);
  await machine(`${CANARY}-m2`, CANARY, "2026.09.01-001");
  await machine(`${BROAD}-m1`, BROAD);
}, 60_000);

afterEach(() => vi.restoreAllMocks());

afterAll(async () => {
  for (const c of cleanup.reverse()) await c().catch(() => undefined);
  for (const s of held) s.destroy();
  await new Promise<void>((r) => silent.close(() => r()));
  await rm(dir, { recursive: true, force: true });
});

interface Doc {
  contexts: number;
  reached: number;
  rows: Record<string, unknown>[];
}

describe("liken fleet status over 50 contexts", () => {
  it("answers within 5 s with a row per Cluster, and a NOT REACHED row per dead context", async () => {
    // 4 s, not the default 3 s: here the 45 live contexts are one API server on this loaded
    // machine, doing 90 TLS handshakes at once (up to 2.9 s seen at a load of 32 on 2 cores),
    // where a real fleet spreads them over 45 servers. The silent contexts take the 4 s.
    const r = await liken(["fleet", "status", "-l", SELECTOR, "-o", "json", "--timeout", "4s"]);
    expect(r.error).toBeUndefined();
    console.log(`liken fleet status over 50 contexts: ${Math.round(r.ms)} ms`);
    expect(r.ms).toBeLessThan(5000);
    const doc = JSON.parse(r.stdout) as Doc;
    expect(doc.contexts).toBe(50);
    expect(doc.reached).toBe(LIVE);
    const canary = doc.rows.filter((x) => x.cluster === CANARY);
    expect(canary).toHaveLength(LIVE);
    expect(canary[0]).toMatchObject({
      context: "live-0",
      ring: "canary",
      release: VERSION_A,
      onRelease: 1,
      machines: 2,
    });
    expect(doc.rows.find((x) => x.context === "live-7" && x.cluster === BROAD)).toMatchObject({
      ring: "broad",
      onRelease: 0,
      machines: 1,
    });
    const dead = doc.rows.filter((x) => "unreachable" in x);
    expect(dead.map((x) => x.context).sort()).toEqual(
      ["refused-0", "refused-1", "refused-2", "silent-0", "silent-1"].sort(),
    );
    expect(String(dead.find((x) => x.context === "refused-0")!.unreachable)).toMatch(
      /ECONNREFUSED/,
    );
    expect(dead.find((x) => x.context === "silent-0")!.unreachable).toBe("no answer within 4s");
  }, 60_000);

  it("reads the 45 live contexts alone well within the deadline", async () => {
    const live = Array.from({ length: LIVE }, (_, i) => `live-${i}`).join(",");
    const r = await liken(["fleet", "status", "--contexts", live, "-l", SELECTOR, "-o", "json"]);
    console.log(`liken fleet status over the ${LIVE} live contexts: ${Math.round(r.ms)} ms`);
    expect((JSON.parse(r.stdout) as Doc).reached).toBe(LIVE);
    expect(r.ms).toBeLessThan(5000);
  }, 60_000);

  it("prints a table with one line per row and says how many contexts answered", async () => {
    const r = await liken(["fleet", "status", "--contexts", "live-0,refused-0", "-l", SELECTOR]);
    const lines = r.stdout.trimEnd().split("\n");
    expect(lines[0]).toMatch(
      /^CONTEXT\s+CLUSTER\s+RING\s+RELEASE\s+MACHINES\s+STATUS\s+BLOCKED BY$/,
    );
    expect(lines.find((l) => l.includes(CANARY))).toMatch(
      new RegExp(`^live-0\\s+${CANARY}\\s+canary\\s+${VERSION_A}\\s+1/2\\s`),
    );
    expect(lines.find((l) => l.startsWith("refused-0"))).toMatch(/NOT REACHED\s+.*ECONNREFUSED/);
    expect(lines.at(-1)).toBe("1 of 2 contexts answered");
  }, 30_000);

  it("refuses a context the kubeconfig does not have, before reading anything", async () => {
    const r = await liken(["fleet", "status", "--contexts", "live-0,nope"]);
    expect(r.stdout).toBe("");
    expect(r.error).toMatchObject({ code: "LIKEN_FLEET_NO_CONTEXT" });
    expect(String((r.error as Error).message)).toMatch(/--contexts names nope/);
  });
});

describe("liken rollout pause|resume --contexts", () => {
  const paused = async (name: string): Promise<boolean | undefined> =>
    (await api.clusters.get(name)).spec.rollout?.paused;

  it("pauses every reachable context's Clusters, names the ones it missed, and exits non-zero", async () => {
    const r = await liken([
      "rollout",
      "pause",
      CANARY,
      "--contexts",
      "live-0,refused-1,silent-1",
      "--timeout",
      "2s",
    ]);
    expect(r.stdout).toContain(`live-0: ${CANARY} paused`);
    expect(r.stdout).toMatch(/refused-1: NOT REACHED: .*ECONNREFUSED/);
    expect(r.stdout).toMatch(/silent-1: NOT REACHED: no answer within 2s/);
    expect(r.stdout).toContain("paused in 1 of 3 contexts");
    expect(r.error).toMatchObject({ code: "LIKEN_FLEET_NOT_ALL_REACHED" });
    expect((r.error as Error).message).toContain("--contexts refused-1,silent-1");
    expect(await paused(CANARY)).toBe(true);
    expect(await paused(BROAD)).not.toBe(true);
  }, 30_000);

  it("pauses and resumes every selected Cluster of many contexts, exit 0 when all were reached", async () => {
    const p = await liken(["rollout", "pause", "--contexts", "live-1,live-2", "-l", SELECTOR]);
    expect(p.error).toBeUndefined();
    // Both contexts reach the same API server here, at once: one of them pauses BROAD, the
    // other finds it paused (its conditioned write met a 409 and it read again).
    expect(p.stdout).toMatch(
      new RegExp(`^live-1: ${BROAD} (already )?paused, ${CANARY} already paused$`, "m"),
    );
    expect(p.stdout).toMatch(
      new RegExp(`^live-2: ${BROAD} (already )?paused, ${CANARY} already paused$`, "m"),
    );
    expect(p.stdout.match(new RegExp(`${BROAD} paused`, "g"))).toHaveLength(1);
    expect(p.stdout).toContain("paused in 2 of 2 contexts");
    expect(await paused(BROAD)).toBe(true);

    const status = await liken(["fleet", "status", "--contexts", "live-3", "-l", SELECTOR]);
    expect(status.stdout).toMatch(new RegExp(`${BROAD}.*paused \\(liken rollout resume\\)`));

    const r = await liken(["rollout", "resume", "--contexts", "live-3", "-l", SELECTOR]);
    expect(r.error).toBeUndefined();
    expect(r.stdout).toContain(`live-3: ${BROAD} resumed, ${CANARY} resumed`);
    expect(await paused(BROAD)).toBe(false);
    expect(await paused(CANARY)).toBe(false);
  }, 30_000);

  it("a context without the named Cluster is not reached, and says why", async () => {
    const r = await liken(["rollout", "pause", `${suffix}-none`, "--contexts", "live-4"]);
    expect(r.stdout).toContain(`live-4: NOT REACHED: holds no Cluster ${suffix}-none`);
    expect(r.error).toMatchObject({ code: "LIKEN_FLEET_NOT_ALL_REACHED" });
  });

  it("refuses --contexts with a machine, and --selector without --contexts", async () => {
    const a = await liken(["rollout", "resume", CANARY, "m1", "--contexts", "live-0"]);
    expect(a.error).toMatchObject({ code: "LIKEN_OPERATOR_USAGE" });
    const b = await liken(["rollout", "pause", CANARY, "-l", SELECTOR]);
    expect(b.error).toMatchObject({ code: "LIKEN_FLEET_USAGE" });
    expect(await paused(CANARY)).not.toBe(true);
  });
});
