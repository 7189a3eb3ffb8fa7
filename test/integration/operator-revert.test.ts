// Fleet-wide revert and pause with the real cluster-operator process on the real API server,
// the releases served by a real channel (so the operator reads and verifies each release.yaml
// and its revertFloor), the machines' side written by the test as an agent would
// (operator-fleet.ts). Each rule is seen where a person sees it: the Cluster's status, its
// conditions, the STATUS and LKG columns, the Events, the CLI's words.
//   - the command: `liken rollout revert` takes the fleet back to the last known good, the
//     turns go to the release it goes back to, and the release is refused if targeted again;
//   - the threshold: spec.rollout.revert reverts by itself and says why, on failed trials and
//     on failed post-promotion health (the gate named);
//   - the floor: a release that declares revertFloor above the last known good is not reverted;
//   - the pause: no turn while paused, turns again after `liken rollout resume`;
//   - after promotion: a real Prometheus scrapes the fleet's metric; it goes bad an hour
//     "later" (when the test says so) and spec.rollout.revert.prometheus reverts the release;
//   - the race: a revert decided on a Cluster whose spec.version changes before its write
//     meets a 409 and resolves to the new target.
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { execFile } from "node:child_process";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { needsTool } from "../support/tool-build.js";
import type { Cluster, MachineStatus, ReleaseRef } from "../../src/api/types.js";
import { buildRelease } from "../../src/release/build.js";
import { serveChannel, type ChannelServer } from "../../src/release/serve.js";
import { filler } from "../../src/lab/releases.js";
import { kubeconfigPath, kubectl, uniqueName, waitFor } from "../support/kube.js";
import { PrometheusServer } from "../support/prometheus.js";
import http from "node:http";
import type { AddressInfo } from "node:net";
import {
  Heartbeats,
  api,
  clusterEvents,
  createMachine,
  deleteAll,
  ensureNamespaces,
  now,
  startOperatorUndone,
  undo,
  waitForLog,
  writeStatus,
  type Cleanups,
  type OperatorProcess,
} from "./operator-fleet.js";

const run = promisify(execFile);
const LIKEN = path.resolve(import.meta.dirname, "../../bin/liken.js");
const ARGS = ["--start-grace", "1s", "--lost-after", "30s", "--no-leader-elect"];
const R1 = "2026.11.01-001";
const R2 = "2026.11.02-001";
/** Declares revertFloor R2: a machine that ran it cannot go back to R1. */
const R3 = "2026.11.03-001";

const cleanups: Cleanups = [];
let channel: ChannelServer;
let dir: string;
const rel: Record<string, ReleaseRef> = {};

async function publish(version: string, revertFloor?: string): Promise<void> {
  const src = path.join(dir, "src", version);
  await mkdir(src, { recursive: true });
  await writeFile(path.join(src, "rootfs"), filler(`rootfs ${version}`, 8 * 1024));
  const built = await buildRelease({
    version,
    out: path.join(dir, "channel"),
    artifacts: [{ name: "rootfs", file: path.join(src, "rootfs") }],
    ...(revertFloor === undefined ? {} : { revertFloor }),
  });
  rel[version] = { version, digest: built.digest };
}

beforeAll(async () => {
  await ensureNamespaces();
  dir = await mkdtemp(path.join(tmpdir(), "liken-revert-"));
  await publish(R1);
  await publish(R2);
  await publish(R3, R2);
  channel = await serveChannel(path.join(dir, "channel"));
  cleanups.push(() => rm(dir, { recursive: true, force: true }));
  cleanups.push(() => channel.close());
}, 120_000);
afterAll(() => undo(cleanups), 120_000);

function start(id: string, env: NodeJS.ProcessEnv = {}): OperatorProcess {
  return startOperatorUndone(cleanups, id, ARGS, env);
}

/** The operator's /metrics text, from the address its log says it serves them on. */
async function metricsOf(o: OperatorProcess): Promise<string> {
  const line = o
    .log()
    .split("\n")
    .find((l) => l.includes("metrics served"));
  const url = /"url":"([^"]+)"/.exec(line ?? "")?.[1];
  if (url === undefined)
    throw new Error(`the operator did not log its metrics address:\n${o.log()}`);
  return (await fetch(url)).text();
}

async function liken(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    return { code: 0, ...(await run(LIKEN, [...args, "--kubeconfig", kubeconfigPath()])) };
  } catch (e) {
    const x = e as { code?: number; stdout?: string; stderr?: string };
    return { code: x.code ?? 1, stdout: x.stdout ?? "", stderr: x.stderr ?? "" };
  }
}

/** A Cluster on R1 with these machines on R1 and Ready, its catalog the three releases. */
async function fleet(names: string[], rollout: Cluster["spec"]["rollout"] = {}): Promise<string> {
  const cluster = uniqueName("revert");
  cleanups.push(() => deleteAll(cluster, names));
  await api.clusters.create({
    apiVersion: "liken.sh/v1alpha1",
    kind: "Cluster",
    metadata: { name: cluster },
    spec: {
      version: R1,
      releases: { source: channel.url, catalog: [rel[R1]!, rel[R2]!, rel[R3]!] },
      disruption: { maxUnavailable: 1 },
      // The failure brake off: the tests count failures past the first.
      rollout: { maxFailedTrials: 0, ...rollout },
    },
  });
  for (const name of names) {
    await createMachine(cluster, { name });
    await writeStatus(name, on(R1));
  }
  const beats = new Heartbeats(cluster, names);
  await beats.start();
  cleanups.push(async () => beats.stop());
  return cluster;
}

const on = (v: string): MachineStatus => ({ ...rel[v]!, step: "Ready" });
const cond = (c: Cluster, type: string) => c.status?.conditions?.find((x) => x.type === type);
const get = (name: string) => api.clusters.get(name);

/** Waits until the Cluster satisfies `ok`; returns it. */
async function until(name: string, what: string, ok: (c: Cluster) => boolean): Promise<Cluster> {
  return waitFor(
    what,
    async () => {
      const c = await get(name);
      return ok(c) ? c : undefined;
    },
    { timeoutMs: 30_000, intervalMs: 200 },
  );
}

/** The fleet promoted R1 and then `v`: lastKnownGood `v`, priorKnownGood R1. */
async function promote(cluster: string, names: string[], v: string): Promise<void> {
  await until(cluster, `lastKnownGood ${R1}`, (c) => c.status?.lastKnownGood?.version === R1);
  await api.clusters.patch(cluster, { spec: { version: v } });
  for (const n of names) await writeStatus(n, on(v));
  await until(cluster, `lastKnownGood ${v}`, (c) => c.status?.lastKnownGood?.version === v);
}

/** A machine running `running` that staged `target` in its other slot and asks for a turn. */
function asks(running: string, target: string): MachineStatus {
  const at = now();
  return {
    ...rel[running]!,
    step: "UpdatePending",
    target: rel[target]!,
    staged: { ...rel[target]!, slot: "a", at },
    turnRequest: { ...rel[target]!, at },
  };
}

describe("fleet-wide revert with the real operator", () => {
  let op: OperatorProcess;
  beforeAll(() => {
    op = start("op-revert");
  });
  // The race below runs its own (held) copy alone.
  afterAll(() => op.stop(), 30_000);

  it("the command: back to the last known good under turns, the release revoked and refused again", async () => {
    const names = [uniqueName("m1"), uniqueName("m2")];
    const cluster = await fleet(names);
    await promote(cluster, names, R2);
    const wide = await kubectl(["get", "cluster", cluster, "-o", "wide"]);
    expect(wide.stdout).toMatch(/\bLKG\b/);
    expect(wide.stdout).toContain(R2);

    const r = await liken(["rollout", "revert", cluster, "--reason", "NIC drops packets"]);
    expect(r.stderr).toBe("");
    expect(r.stdout).toContain(`asked cluster-operator to revert ${R2} to ${R1}`);
    const c = await until(cluster, "the revert in force", (x) => x.status?.revert !== undefined);
    expect(c.status?.revert).toMatchObject({ from: rel[R2], to: rel[R1], trigger: "Request" });
    expect(c.status?.revokedReleases).toEqual([
      expect.objectContaining({ ...rel[R2], reason: "RevertedByRequest" }),
    ]);
    expect(cond(c, "Reverted")).toMatchObject({ status: "True", reason: "RevertedByRequest" });
    expect(cond(c, "Reverted")?.message).toContain("NIC drops packets");

    // The machines see R1 as the target; one staged it (its other slot) and gets a turn for R1.
    await writeStatus(names[0]!, asks(R2, R1));
    const granted = await until(cluster, "a turn for R1", (x) =>
      (x.status?.rebootTurns ?? []).some((t) => t.machine === names[0] && t.version === R1),
    );
    expect(granted.status?.rebootTurns).toHaveLength(1); // the budget: one at a time
    await writeStatus(names[0]!, on(R1));
    await writeStatus(names[1]!, on(R1));
    const back = await until(
      cluster,
      "every machine back, R1 known good again",
      (x) => x.status?.phase === "Ready" && x.status.lastKnownGood?.version === R1,
    );
    expect(back.status?.rebootTurns ?? []).toEqual([]);
    const events = await clusterEvents(cluster);
    expect(events.some((e) => e.reason === "Reverted" && e.message.includes(R2))).toBe(true);

    // Targeted again (after another target), the revoked release is refused.
    await api.clusters.patch(cluster, { spec: { version: R1 } });
    const ended = await until(
      cluster,
      "the revert ended by the new spec.version",
      (x) => cond(x, "Reverted")?.reason === "RevertSuperseded",
    );
    expect(ended.status?.revert).toBeUndefined();
    await api.clusters.patch(cluster, { spec: { version: R2 } });
    const refused = await until(
      cluster,
      "ReleaseRevoked",
      (x) => cond(x, "Progressing")?.reason === "ReleaseRevoked",
    );
    expect(refused.status?.display).toBe("ReleaseRevoked");
    expect(cond(refused, "Progressing")?.message).toContain(`liken rollout unrevoke ${cluster}`);
    const table = await kubectl(["get", "cluster", cluster]);
    expect(table.stdout).toMatch(/\bReleaseRevoked\b/);

    // A person clears it: the release may be targeted again, and the fleet moves to it.
    const cleared = await liken(["rollout", "unrevoke", cluster, R2]);
    expect(cleared.stderr).toBe("");
    expect(cleared.stdout).toContain(`cleared the revocation of ${R2}`);
    const again = await until(
      cluster,
      "R2 the target again",
      (x) => cond(x, "Progressing")?.reason !== "ReleaseRevoked",
    );
    expect(again.status?.revokedReleases ?? []).toEqual([]);
    const none = await liken(["rollout", "unrevoke", cluster, R2]);
    expect(none.stderr).toContain("LIKEN_OPERATOR_NOT_REVOKED");
  });

  it("the threshold: failed trials reach spec.rollout.revert.maxFailures and the fleet reverts by itself", async () => {
    const names = [uniqueName("t1"), uniqueName("t2"), uniqueName("t3")];
    const cluster = await fleet(names, { revert: { maxFailures: 2 } });
    await until(cluster, `lastKnownGood ${R1}`, (c) => c.status?.lastKnownGood?.version === R1);
    await api.clusters.patch(cluster, { spec: { version: R2 } });
    const failed = (at: string): MachineStatus => ({
      ...on(R1),
      step: "Failed",
      lastTrial: { ...rel[R2]!, slot: "b", result: "Failed", at, reason: "HealthCheckFailed" },
    });
    await writeStatus(names[0]!, failed(now()));
    await writeStatus(names[1]!, on(R2));
    // One failure is below the threshold: nothing reverts (decided on a view that holds it:
    // the failure was written before the machine that moved).
    const one = await until(
      cluster,
      "the operator saw both machines (or reverted)",
      (c) =>
        c.status?.revert !== undefined ||
        (cond(c, "Progressing")?.message ?? "").includes("2 of 3 machine(s) still to move"),
    );
    expect(one.status?.revert).toBeUndefined();
    await writeStatus(names[2]!, failed(now()));
    const c = await until(cluster, "the automatic revert", (x) => x.status?.revert !== undefined);
    expect(c.status?.revert).toMatchObject({
      from: rel[R2],
      to: rel[R1],
      trigger: "Automatic",
      by: op.identity,
    });
    const why = cond(c, "Reverted");
    expect(why).toMatchObject({ status: "True", reason: "RevertedOnFailedTrials" });
    expect(c.status?.revert).toMatchObject({
      reason: "RevertedOnFailedTrials",
      gate: "trial HealthCheckFailed",
    });
    expect(why?.message).toContain("spec.rollout.revert.maxFailures 2");
    expect(why?.message).toContain(`${names[0]} (HealthCheckFailed`);
    const events = await waitFor(
      "the Reverted Event",
      async () => {
        const e = (await clusterEvents(cluster)).filter((x) => x.reason === "Reverted");
        return e.length > 0 ? e : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 500 },
    );
    expect(events[0]!.type).toBe("Warning");
    expect(events[0]!.message).toContain("(RevertedOnFailedTrials, gate trial HealthCheckFailed)");
  });

  it("post-promotion health: failed gates after promotion reach maxFailures and the fleet reverts by itself, naming the gate", async () => {
    const names = [uniqueName("h1"), uniqueName("h2"), uniqueName("h3")];
    const cluster = await fleet(names, { revert: { maxFailures: 2 } });
    await promote(cluster, names, R2);
    // The gates run again on each machine's boot of R2; the agent writes the verdict.
    const health = (n: string, result: "Passed" | "Failed"): MachineStatus => ({
      ...on(R2),
      postPromotionHealth: {
        ...rel[R2]!,
        bootID: `boot-${n}`,
        result,
        ...(result === "Failed" ? { gate: "nic-ping", message: "exit status 1" } : {}),
        at: now(),
      },
    });
    await writeStatus(names[0]!, health(names[0]!, "Failed"));
    await writeStatus(names[1]!, health(names[1]!, "Passed"));
    await writeStatus(names[2]!, health(names[2]!, "Failed"));
    const c = await until(cluster, "the automatic revert", (x) => x.status?.revert !== undefined);
    expect(c.status?.revert).toMatchObject({ from: rel[R2], to: rel[R1], trigger: "Automatic" });
    const why = cond(c, "Reverted");
    expect(why).toMatchObject({ status: "True", reason: "RevertedOnHealthGate" });
    expect(c.status?.revert).toMatchObject({ reason: "RevertedOnHealthGate", gate: "nic-ping" });
    expect(why?.message).toContain(`2 of 3 machine(s) that took ${R2} failed`);
    expect(why?.message).toContain(`${names[0]} (PostPromotionHealthFailed gate nic-ping`);
    expect(c.status?.revokedReleases?.map((r) => r.version)).toEqual([R2]);
    // The metric names the reason and the gate (counted once the status write returned).
    const want = `cluster="${cluster}",trigger="Automatic",reason="RevertedOnHealthGate",gate="nic-ping"} 1`;
    await waitFor(
      "liken_operator_reverts_total naming the gate",
      async () => ((await metricsOf(op)).includes(want) ? true : undefined),
      { timeoutMs: 10_000, intervalMs: 250 },
    );
  });

  it("the floor: a release that declares revertFloor above the last known good is not reverted", async () => {
    const names = [uniqueName("f1"), uniqueName("f2")];
    const cluster = await fleet(names);
    await promote(cluster, names, R3);
    const r = await liken(["rollout", "revert", cluster]);
    expect(r.stderr).toBe("");
    const c = await until(
      cluster,
      "RevertBelowFloor (or a revert)",
      (x) => cond(x, "Reverted")?.reason === "RevertBelowFloor" || x.status?.revert !== undefined,
    );
    expect(c.status?.revert).toBeUndefined();
    expect(cond(c, "Reverted")?.status).toBe("False");
    expect(cond(c, "Reverted")?.message).toContain(`declares revertFloor ${R2}`);
    expect(c.status?.revert).toBeUndefined();
    expect(c.status?.revokedReleases).toBeUndefined();
  });

  it("the pause: no turn while paused, shown in STATUS and liken status; resume grants again", async () => {
    const names = [uniqueName("p1")];
    const cluster = await fleet(names);
    await until(cluster, `lastKnownGood ${R1}`, (c) => c.status?.lastKnownGood?.version === R1);
    const paused = await liken(["rollout", "pause", cluster]);
    expect(paused.stdout).toContain(`paused Cluster ${cluster}`);
    await api.clusters.patch(cluster, { spec: { version: R2 } });
    await writeStatus(names[0]!, asks(R1, R2));
    const held = await until(
      cluster,
      "RolloutPaused",
      (c) => cond(c, "Progressing")?.reason === "RolloutPaused",
    );
    expect(held.status?.display).toBe("RolloutPaused");
    expect(held.status?.rebootTurns ?? []).toEqual([]);
    const table = await kubectl(["get", "cluster", cluster]);
    expect(table.stdout).toMatch(/\bRolloutPaused\b/);
    const status = await liken(["status", cluster, "--once"]);
    expect(status.stdout).toContain(`cluster ${cluster}: RolloutPaused, paused`);
    // Decided on a view where the machine asks: it waits, and holds no turn.
    const seen = await until(cluster, "the paused operator saw the machine ask", (c) =>
      (cond(c, "Progressing")?.message ?? "").includes(`1 machine(s) staged ${R2} and wait`),
    );
    expect(seen.status?.rebootTurns ?? []).toEqual([]);

    const resumed = await liken(["rollout", "resume", cluster]);
    expect(resumed.stdout).toContain(`resumed Cluster ${cluster}`);
    await until(cluster, "a turn after resume", (c) => (c.status?.rebootTurns ?? []).length === 1);
  });
});

describe("after promotion: the Prometheus check", () => {
  let prom: PrometheusServer;
  let metrics: http.Server;
  /** What the fleet's own metric reads: the test turns the release bad after its promotion. */
  let dropRatio = 0;
  let op: OperatorProcess;

  needsTool("prometheus");
  beforeAll(async () => {
    metrics = http.createServer((_req, res) => {
      res.writeHead(200, { "content-type": "text/plain; version=0.0.4" });
      res.end(`# TYPE liken_test_nic_drop_ratio gauge\nliken_test_nic_drop_ratio ${dropRatio}\n`);
    });
    await new Promise<void>((r) => metrics.listen(0, "127.0.0.1", r));
    cleanups.push(() => new Promise<void>((r) => metrics.close(() => r())));
    const port = (metrics.address() as AddressInfo).port;
    prom = await PrometheusServer.start({
      rules: "groups: []\n",
      staticTargets: { fleet: [`127.0.0.1:${port}`] },
      fileJobs: [],
    });
    cleanups.push(() => prom.stop());
    op = start("op-prom");
  }, 120_000);
  afterAll(() => op.stop(), 30_000);

  it("a release that proves and goes bad later is reverted by itself, and says which query tripped", async () => {
    const names = [uniqueName("q1"), uniqueName("q2")];
    const query = "max(liken_test_nic_drop_ratio)";
    const cluster = await fleet(names, {
      revert: {
        prometheus: { url: prom.url, query, maxValue: 0.5, failureLimit: 2, intervalSeconds: 1 },
      },
    });
    await promote(cluster, names, R2);
    // Good for a while: the check passes (several intervals; Prometheus scrapes every second).
    await waitFor(
      "Prometheus has the metric",
      async () => {
        const r = await fetch(`${prom.url}/api/v1/query?query=${encodeURIComponent(query)}`);
        const body = (await r.json()) as { data: { result: unknown[] } };
        return body.data.result.length > 0 ? true : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 500 },
    );
    expect((await get(cluster)).status?.revert).toBeUndefined();

    dropRatio = 0.9; // "an hour later": the NIC driver drops packets under load
    const c = await until(
      cluster,
      "the revert by the Prometheus check",
      (x) => x.status?.revert !== undefined,
    );
    expect(c.status?.revert).toMatchObject({
      from: rel[R2],
      to: rel[R1],
      trigger: "Automatic",
      reason: "RevertedOnPrometheusQuery",
      gate: "prometheus",
    });
    expect(cond(c, "Reverted")?.reason).toBe("RevertedOnPrometheusQuery");
    const why = cond(c, "Reverted")?.message ?? "";
    expect(why).toContain(`query ${query} at ${prom.url}`);
    expect(why).toContain("returned 0.9 > maxValue 0.5");
    expect(c.status?.revokedReleases?.map((r) => r.version)).toEqual([R2]);
  });
});

it("the race: a revert decided on a Cluster whose spec.version changes before its write meets a 409 and resolves to the new target", async () => {
  // A copy held between its decision and its write (hold.ts), as a slow request would be.
  const held = start("op-held", { LIKEN_TEST_HOLD_TURN_WRITE: "1" });
  const names = [uniqueName("r1"), uniqueName("r2")];
  const cluster = await fleet(names, { revert: { maxFailures: 1 } });
  await until(cluster, `lastKnownGood ${R1}`, (c) => c.status?.lastKnownGood?.version === R1);
  await api.clusters.patch(cluster, { spec: { version: R2 } });
  await writeStatus(names[0]!, {
    ...on(R1),
    step: "Failed",
    lastTrial: { ...rel[R2]!, slot: "b", result: "Failed", at: now(), reason: "TrialFellBack" },
  });
  await waitForLog(held, "holding this turn write until SIGUSR2");
  // Meanwhile a person moves spec.version on to R3; then the held write goes.
  await api.clusters.patch(cluster, { spec: { version: R3 } });
  process.kill(held.child.pid!, "SIGUSR2");
  await waitForLog(held, "(409 Conflict): nothing was written; deciding again");
  const c = await until(
    cluster,
    "the new target, no revert",
    (x) => x.status?.observedGeneration === x.metadata.generation,
  );
  expect(c.spec.version).toBe(R3);
  expect(c.status?.revert).toBeUndefined();
  expect(c.status?.revokedReleases).toBeUndefined();
  expect(cond(c, "Progressing")?.reason).not.toBe("ReleaseRevoked");
});
