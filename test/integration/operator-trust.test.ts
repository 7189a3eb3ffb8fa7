// The channel trust modes on the real control plane, against a signed channel served over real
// HTTP (`liken channel serve`'s server) and signed with `liken release sign`'s functions.
// cluster-operator runs in this process (its wall clock is the test's to move, for the clock
// attacks). Each hostile channel: ChannelTrusted=False with the reason and the role, an Event,
// the refusal metric, no turn for the machine that asks for the offered release; then the good
// channel served again and the machine gets its turn. Each test has a channel, a Cluster and a
// machine of its own, and the operator reconciles every Cluster: the tests run side by side
// (describe.concurrent, vitest's maxConcurrency at a time), since each mostly waits on channel
// reads; the clock attacks, which move the operator's clock for every Cluster, run alone last.
import { readFile, rm, writeFile, cp } from "node:fs/promises";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Cluster, ClusterCondition, TrustSpec } from "../../src/api/types.js";
import type { Logger } from "../../src/operator/logger.js";
import { Operator } from "../../src/operator/run/operator.js";
import {
  recallRelease,
  refreshChannel,
  rotateKey,
  tufDir,
  type InitOptions,
} from "../../src/release/tuf.js";
import { kubeConfig, kubectl, uniqueName, waitFor } from "../support/kube.js";
import { testChannel, type TestChannel } from "../support/tuf-channel.js";
import {
  Heartbeats,
  api,
  clusterEvents,
  createMachine,
  deleteAll,
  ensureNamespaces,
  now,
  writeStatus,
} from "./operator-fleet.js";

const V1 = "2026.11.01-001";
const V2 = "2026.11.02-001";
const V3 = "2026.11.03-001";
const DAY_MS = 24 * 3600_000;

let offset = 0;
const lines: string[] = [];
const log: Logger = {
  info: (o, msg) => lines.push(`${msg ?? ""} ${JSON.stringify(o)}`),
  warn: (o, msg) => lines.push(`${msg ?? ""} ${JSON.stringify(o)}`),
  error: (o, msg) => lines.push(`${msg ?? ""} ${JSON.stringify(o)}`),
};
const op = new Operator(kubeConfig(), {
  identity: uniqueName("op-trust"),
  startGraceSeconds: 1,
  leaderElection: false,
  // A read of the channel every second: each test waits on a few of them.
  channelIntervalMs: 1000,
  log,
  clocks: { wall: () => Date.now() + offset, mono: () => performance.now() },
});

beforeAll(async () => {
  await ensureNamespaces();
  await op.start();
}, 60_000);
afterAll(async () => {
  await op.stop();
}, 30_000);

interface Scene {
  ch: TestChannel;
  cluster: string;
  machine: string;
  beats: Heartbeats;
  close(): Promise<void>;
}

/** A channel with V1, a Cluster following it that trusts it, and one machine on V1. */
async function scene(
  trust: Partial<TrustSpec> = {},
  init: Partial<InitOptions> = {},
  extra: Partial<Cluster["spec"]> = {},
): Promise<Scene> {
  const ch = await testChannel(init);
  const d1 = await ch.publish(V1);
  const cluster = uniqueName("trust");
  const machine = uniqueName("t");
  await api.clusters.create({
    apiVersion: "liken.sh/v1alpha1",
    kind: "Cluster",
    metadata: { name: cluster },
    spec: {
      releases: {
        source: `${ch.source}/`,
        trust: {
          mode: "channel",
          channel: "stable",
          rootDigest: ch.rootDigest,
          follow: {},
          ...trust,
        },
      },
      disruption: { maxUnavailable: 1 },
      ...extra,
    },
  });
  await createMachine(cluster, { name: machine, policy: "Auto" });
  await writeStatus(machine, { version: V1, digest: d1, step: "Ready" });
  const beats = new Heartbeats(cluster, [machine], 400);
  await beats.start();
  return {
    ch,
    cluster,
    machine,
    beats,
    async close() {
      beats.stop();
      await deleteAll(cluster, [machine]);
      await ch.close();
    },
  };
}

const cond = async (cluster: string) =>
  (await api.clusters.get(cluster)).status?.conditions?.find((c) => c.type === "ChannelTrusted");

async function trusted(s: Scene, version: string | undefined): Promise<Cluster> {
  return waitFor(
    `${s.cluster}: ChannelTrusted True with target ${version ?? "none"}`,
    async () => {
      const c = await api.clusters.get(s.cluster);
      const t = c.status?.conditions?.find((x) => x.type === "ChannelTrusted");
      return t?.status === "True" && c.status?.trust?.target?.version === version ? c : undefined;
    },
    { timeoutMs: 30_000, intervalMs: 200 },
  );
}

/** The machine staged `version` and asks for its turn. */
async function asks(s: Scene, version: string, digest: string, running: string): Promise<void> {
  const at = now();
  await writeStatus(s.machine, {
    version: V1,
    digest: running,
    step: "UpdatePending",
    target: { version, digest },
    staged: { version, digest, slot: "b", at },
    turnRequest: { version, digest, at },
  });
}

/** ChannelTrusted once it reads False for `reason`. */
async function distrusted(s: Scene, reason: string): Promise<ClusterCondition> {
  return waitFor(
    `${s.cluster}: ChannelTrusted False ${reason}`,
    async () => {
      const x = await cond(s.cluster);
      return x?.status === "False" && x.reason === reason ? x : undefined;
    },
    { timeoutMs: 30_000, intervalMs: 200 },
  );
}

/**
 * Until the operator read the channel (`which`: what the wait's message calls it) two more
 * times: each read writes its own lastCheckTime, on whatever the operator's clock reads.
 */
async function twoMoreReads(s: Scene, which: string): Promise<void> {
  const seen = new Set<string>();
  await waitFor(
    `${s.cluster}: two more reads of the ${which} channel`,
    async () => {
      const at = (await api.clusters.get(s.cluster)).status?.channel?.lastCheckTime;
      if (at !== undefined) seen.add(at);
      return seen.size >= 3;
    },
    { timeoutMs: 30_000, intervalMs: 100 },
  );
}

/**
 * Alice reverts `from` ("NIC drops"), as `liken rollout revert` writes spec.rollout's
 * revertRequest; until the operator records the revert to `to`.
 */
async function personReverts(
  s: Scene,
  from: { version: string; digest: string },
  to: string,
): Promise<void> {
  const request = { ...from, by: "alice", at: now(), reason: "NIC drops" };
  await kubectl([
    "patch",
    "cluster",
    s.cluster,
    "--type=merge",
    "-p",
    JSON.stringify({ spec: { rollout: { revertRequest: request } } }),
  ]);
  await waitFor(
    `${s.cluster}: the revert of ${from.version} to ${to} recorded`,
    async () => (await api.clusters.get(s.cluster)).status?.revert?.to.version === to,
    { timeoutMs: 30_000, intervalMs: 200 },
  );
}

/** ChannelTrusted=False for `reason`, naming `role`; held over two more reads without a turn. */
async function refused(s: Scene, reason: string, role: string): Promise<void> {
  const c = await distrusted(s, reason);
  expect(c.message).toContain(`${role} metadata`);
  await twoMoreReads(s, "hostile");
  const after = await api.clusters.get(s.cluster);
  expect(after.status?.rebootTurns ?? []).toEqual([]);
  expect(after.status?.trust?.target).toBeUndefined();
  expect((await cond(s.cluster))?.reason).toBe(reason);
  const events = await clusterEvents(s.cluster);
  expect(events.some((e) => e.reason === "ChannelDistrusted" && e.message.includes(reason))).toBe(
    true,
  );
  const metric = await op.metrics.registry.getSingleMetricAsString(
    "liken_operator_channel_trust_refusals_total",
  );
  expect(metric).toContain(`cluster="${s.cluster}",reason="${reason}",role="${role}"`);
}

/** The good channel again: the target comes back and the machine gets its turn. */
async function followed(s: Scene, version: string): Promise<void> {
  await trusted(s, version);
  await waitFor(
    `${s.cluster}: a turn for ${s.machine} on ${version}`,
    async () =>
      (await api.clusters.get(s.cluster)).status?.rebootTurns?.some(
        (t) => t.machine === s.machine && t.version === version,
      ),
    { timeoutMs: 30_000, intervalMs: 200 },
  );
}

/** Waits until the Cluster records no reboot turn (the machine's came back). */
async function turnReleased(s: Scene): Promise<void> {
  await waitFor(
    "the turn released",
    async () => (await api.clusters.get(s.cluster)).status?.rebootTurns?.length === 0,
    { timeoutMs: 30_000 },
  );
}

/** The channel recalls V2 for `reason`; returns ChannelTrusted once it reads ReleaseRecalled. */
async function recallV2(s: Scene, reason: string): Promise<ClusterCondition> {
  await recallRelease({ repo: s.ch.repo, keys: s.ch.keys, channel: "stable", version: V2, reason });
  return waitFor(
    "ChannelTrusted False ReleaseRecalled",
    async () => {
      const x = await cond(s.cluster);
      return x?.reason === "ReleaseRecalled" ? x : undefined;
    },
    { timeoutMs: 30_000, intervalMs: 200 },
  );
}

async function readsSince(s: Scene, n: number): Promise<void> {
  const first = (await api.clusters.get(s.cluster)).status?.trust?.verifiedAt ?? "";
  await waitFor(
    `${s.cluster}: ${n} verified read(s) after ${first}`,
    async () => {
      const at = (await api.clusters.get(s.cluster)).status?.trust?.verifiedAt ?? "";
      return at !== "" && (first === "" || Date.parse(at) >= Date.parse(first) + n * 1000);
    },
    { timeoutMs: 30_000, intervalMs: 200 },
  );
}

describe.concurrent("trust mode channel", () => {
  it("a release the signed channel names is trusted without a catalog entry; a recalled one gets no turn, and the Cluster says why", async () => {
    const s = await scene({ follow: undefined }, {}, { version: V1 });
    try {
      const c1 = await trusted(s, V1);
      expect(c1.spec.releases.catalog).toBeUndefined();
      const d1 = c1.status!.trust!.target!.digest;
      const d2 = await s.ch.publish(V2);
      await kubectl([
        "patch",
        "cluster",
        s.cluster,
        "--type=merge",
        "-p",
        JSON.stringify({ spec: { version: V2 } }),
      ]);
      await asks(s, V2, d2, d1);
      await followed(s, V2);
      const wide = await kubectl(["get", "cluster", s.cluster, "-o", "wide"]);
      expect(wide.stdout).toMatch(/TRUST\s+FRESHNESS/);
      expect(wide.stdout).toMatch(/channel\s+fresh until/);
      // The machine comes back on V2; then the channel recalls V2.
      await writeStatus(s.machine, { version: V2, digest: d2, step: "Ready" });
      await turnReleased(s);
      const recalled = await recallV2(s, "kernel panics on some NICs");
      expect(recalled.message).toContain("kernel panics on some NICs");
      const c = await api.clusters.get(s.cluster);
      expect(c.status?.trust?.recalled).toEqual({
        version: V2,
        reason: "kernel panics on some NICs",
      });
      expect(c.status?.trust?.target).toBeUndefined();
      // A machine still asking for V2 gets no turn.
      await asks(s, V2, d2, d1);
      await readsSince(s, 2);
      expect((await api.clusters.get(s.cluster)).status?.rebootTurns ?? []).toEqual([]);
    } finally {
      await s.close();
    }
  }, 120_000);

  it("follow: a taken release the channel recalls gets no more turns and the Cluster says why; a newer one is followed", async () => {
    const s = await scene();
    try {
      const d1 = (await trusted(s, V1)).status!.trust!.target!.digest;
      const d2 = await s.ch.publish(V2);
      await asks(s, V2, d2, d1);
      await followed(s, V2);
      await writeStatus(s.machine, { version: V2, digest: d2, step: "Ready" });
      await turnReleased(s);
      const why = await recallV2(s, "disk corruption");
      expect(why.message).toContain("disk corruption");
      await asks(s, V2, d2, d1);
      await readsSince(s, 2);
      const c = await api.clusters.get(s.cluster);
      expect(c.status?.rebootTurns ?? []).toEqual([]);
      expect(c.status?.trust?.target).toBeUndefined();
      expect(c.status?.trust?.newest).toBeUndefined();
      const d3 = await s.ch.publish(V3);
      await asks(s, V3, d3, d2);
      await followed(s, V3);
    } finally {
      await s.close();
    }
  }, 120_000);

  // Issue 38, 2.1: a signed recall of the release the fleet reverts FROM must not cancel the
  // revert half-way (the channel's choice survives as status.trust.taken; the release decision
  // keeps the revert in force: src/release-decision/).
  it("a recall of the release being reverted from does not cancel the revert", async () => {
    const s = await scene();
    const lkg = (v: string) =>
      waitFor(
        `${s.cluster}: lastKnownGood ${v}`,
        async () => (await api.clusters.get(s.cluster)).status?.lastKnownGood?.version === v,
        { timeoutMs: 30_000, intervalMs: 200 },
      );
    try {
      const d1 = (await trusted(s, V1)).status!.trust!.target!.digest;
      await lkg(V1);
      const d2 = await s.ch.publish(V2);
      await asks(s, V2, d2, d1);
      await followed(s, V2);
      await writeStatus(s.machine, { version: V2, digest: d2, step: "Ready" });
      await turnReleased(s);
      await lkg(V2);
      // A person reverts V2 (what `liken rollout revert` writes).
      await personReverts(s, { version: V2, digest: d2 }, V1);
      // Then the channel recalls V2, before the machine went back.
      await recallV2(s, "recalled while reverting");
      // The machine still on V2 staged V1 (its other slot) and asks: the revert goes on.
      const at = now();
      await writeStatus(s.machine, {
        version: V2,
        digest: d2,
        step: "UpdatePending",
        target: { version: V1, digest: d1 },
        staged: { version: V1, digest: d1, slot: "a", at },
        turnRequest: { version: V1, digest: d1, at },
      });
      await waitFor(
        `${s.cluster}: a turn for ${s.machine} to V1`,
        async () =>
          (await api.clusters.get(s.cluster)).status?.rebootTurns?.some(
            (t) => t.machine === s.machine && t.version === V1,
          ),
        { timeoutMs: 30_000, intervalMs: 200 },
      );
      const c = await api.clusters.get(s.cluster);
      expect(c.status?.revert?.from.version).toBe(V2);
      expect(c.status?.trust?.recalls?.map((r) => r.version)).toEqual([V2]);
      expect(c.status?.conditions?.find((x) => x.type === "Reverted")?.status).toBe("True");
    } finally {
      await s.close();
    }
  }, 120_000);

  // Issue 38, 2.2 on the real channel: a revert whose target the channel recalls since goes to
  // the newest proven release neither recalled nor revoked. It is one revert, retargeted: one
  // `Reverted` Event and one count of liken_operator_reverts_total, then one
  // `RevertRetargeted` Event (a retarget counted as a second revert was the defect).
  it("a revert whose target the channel recalls goes to the prior good release, counted once", async () => {
    const s = await scene();
    const m2 = uniqueName("t");
    await createMachine(s.cluster, { name: m2, policy: "Auto" });
    const beats2 = new Heartbeats(s.cluster, [m2], 400);
    await beats2.start();
    const both = async (version: string, digest: string) => {
      await writeStatus(s.machine, { version, digest, step: "Ready" });
      await writeStatus(m2, { version, digest, step: "Ready" });
    };
    const lkg = (v: string) =>
      waitFor(
        `${s.cluster}: lastKnownGood ${v}`,
        async () => (await api.clusters.get(s.cluster)).status?.lastKnownGood?.version === v,
        { timeoutMs: 30_000, intervalMs: 200 },
      );
    try {
      const d1 = (await trusted(s, V1)).status!.trust!.target!.digest;
      await both(V1, d1);
      await lkg(V1);
      const d2 = await s.ch.publish(V2);
      await trusted(s, V2);
      await both(V2, d2);
      await lkg(V2); // priorKnownGood V1
      const d3 = await s.ch.publish(V3);
      await trusted(s, V3);
      // One machine took V3, the other is still on V2: V3 is not proven.
      await writeStatus(s.machine, { version: V3, digest: d3, step: "Ready" });
      await personReverts(s, { version: V3, digest: d3 }, V2);
      // The channel recalls V2, the revert's target: it goes to V1 instead.
      await recallRelease({
        repo: s.ch.repo,
        keys: s.ch.keys,
        channel: "stable",
        version: V2,
        reason: "bad disk driver",
      });
      const c = await waitFor(
        `${s.cluster}: the revert retargeted to V1`,
        async () => {
          const x = await api.clusters.get(s.cluster);
          return x.status?.revert?.to.version === V1 ? x : undefined;
        },
        { timeoutMs: 30_000, intervalMs: 200 },
      );
      expect(c.status?.revert?.from.version).toBe(V3);
      expect(c.status?.revert?.message).toContain(`retargeted from ${V2} to ${V1}`);
      // Two Events about the revert (its start, its retarget), then a few more reads: no more.
      const about = (e: { reason: string }) => /^Revert(ed|Retargeted)$/.test(e.reason);
      await waitFor(
        `${s.cluster}: two Events about the revert`,
        async () => (await clusterEvents(s.cluster)).filter(about).length >= 2,
        { timeoutMs: 30_000, intervalMs: 200 },
      );
      await readsSince(s, 3);
      const events = await clusterEvents(s.cluster);
      const reverted = events.filter((e) => e.reason === "Reverted");
      const retargeted = events.filter((e) => e.reason === "RevertRetargeted");
      expect(reverted.map((e) => e.message)).toHaveLength(1);
      expect(reverted[0]!.message).toContain(`reverting ${V3} to ${V2}`);
      expect(retargeted.map((e) => e.message)).toHaveLength(1);
      expect(retargeted[0]!.message).toContain(`from ${V2} to ${V1}`);
      expect(retargeted[0]!.message).toContain("bad disk driver");
      const counted = await op.metrics.registry.getSingleMetricAsString(
        "liken_operator_reverts_total",
      );
      const mine = counted.split("\n").filter((l) => l.includes(`cluster="${s.cluster}"`));
      expect(mine).toEqual([expect.stringMatching(/ 1$/)]);
      const retargets = await op.metrics.registry.getSingleMetricAsString(
        "liken_operator_revert_retargets_total",
      );
      expect(retargets).toContain(
        `liken_operator_revert_retargets_total{cluster="${s.cluster}"} 1`,
      );
    } finally {
      beats2.stop();
      await deleteAll(s.cluster, [m2]);
      await s.close();
    }
  }, 180_000);

  it("channel+pinned moves only when the catalog's digest equals the channel's", async () => {
    const s = await scene({ mode: "channel+pinned" }, {}, {});
    try {
      await waitFor(
        "CatalogDisagrees (V1 not catalogued)",
        async () => (await cond(s.cluster))?.reason === "CatalogDisagrees",
        { timeoutMs: 30_000 },
      );
      const d2 = await s.ch.publish(V2);
      const d1 = (await api.clusters.get(s.cluster)).status!.trust!.target!.digest;
      await asks(s, V2, d2, d1);
      await kubectl([
        "patch",
        "cluster",
        s.cluster,
        "--type=merge",
        "-p",
        JSON.stringify({
          spec: { releases: { catalog: [{ version: V2, digest: `sha256:${"e".repeat(64)}` }] } },
        }),
      ]);
      const bad = await waitFor(
        "CatalogDisagrees naming V2",
        async () => {
          const x = await cond(s.cluster);
          return x?.reason === "CatalogDisagrees" && x.message.includes(V2) ? x : undefined;
        },
        { timeoutMs: 30_000 },
      );
      expect(bad.message).toContain(d2);
      expect((await api.clusters.get(s.cluster)).status?.rebootTurns ?? []).toEqual([]);
      // A catalog entry cannot change its digest (CEL): remove it, then add the right one.
      await kubectl([
        "patch",
        "cluster",
        s.cluster,
        "--type=merge",
        "-p",
        JSON.stringify({ spec: { releases: { catalog: null } } }),
      ]);
      await kubectl([
        "patch",
        "cluster",
        s.cluster,
        "--type=merge",
        "-p",
        JSON.stringify({ spec: { releases: { catalog: [{ version: V2, digest: d2 }] } } }),
      ]);
      await followed(s, V2);
    } finally {
      await s.close();
    }
  }, 120_000);
});

describe.concurrent("the API server's rules for spec.releases.trust", () => {
  const create = (name: string, spec: Record<string, unknown>) =>
    api.clusters.create({
      apiVersion: "liken.sh/v1alpha1",
      kind: "Cluster",
      metadata: { name },
      spec: spec as unknown as Cluster["spec"],
    });
  const root = `sha256:${"a".repeat(64)}`;
  it("refuses a channel mode without channel or rootDigest, and spec.version with follow; takes spec.version without a catalog entry in mode channel", async () => {
    const names: string[] = [];
    const n = () => {
      const x = uniqueName("cel");
      names.push(x);
      return x;
    };
    try {
      await expect(
        create(n(), {
          releases: { source: "http://x.example/", trust: { mode: "channel", channel: "stable" } },
        }),
      ).rejects.toThrow(/rootDigest/);
      await expect(
        create(n(), {
          version: V1,
          releases: {
            source: "http://x.example/",
            trust: { mode: "channel", channel: "stable", rootDigest: root, follow: {} },
          },
        }),
      ).rejects.toThrow(/follow picks the release by itself/);
      await expect(
        create(n(), {
          version: V1,
          releases: {
            source: "http://x.example/",
            trust: { mode: "channel+pinned", channel: "stable", rootDigest: root },
          },
        }),
      ).rejects.toThrow(/names no entry in spec.releases.catalog/);
      const ok = await create(n(), {
        version: V1,
        releases: {
          source: "http://x.example/",
          trust: { mode: "channel", channel: "stable", rootDigest: root },
        },
      });
      expect(ok.spec.releases.trust?.mode).toBe("channel");
    } finally {
      for (const x of names) await api.clusters.delete(x).catch(() => undefined);
    }
  });
});

/**
 * Hostile channels of one shape: each case makes the channel hostile once V1 is trusted (`d1`
 * is V1's digest, what the machine runs), sees the refusal, and repairs the channel; the runner
 * then sees V2 followed again.
 */
const HOSTILE: {
  name: string;
  scene?: Parameters<typeof scene>;
  attack: (s: Scene, d1: string) => Promise<void>;
}[] = [
  {
    name: "an expired timestamp",
    attack: async (s, d1) => {
      const d2 = await s.ch.publish(V2, "stable", { now: new Date(Date.now() - 3 * DAY_MS) });
      await asks(s, V2, d2, d1);
      await refused(s, "MetadataExpired", "timestamp");
      await refreshChannel({ repo: s.ch.repo, keys: s.ch.keys });
    },
  },
  {
    name: "replayed old metadata (a lower timestamp version than trusted)",
    attack: async (s, d1) => {
      const old = await s.ch.save();
      await refreshChannel({ repo: s.ch.repo, keys: s.ch.keys });
      await readsSince(s, 1);
      const current = await s.ch.save();
      await s.ch.serveSaved(old);
      await refused(s, "MetadataRollback", "timestamp");
      await s.ch.serveSaved(current);
      const d2 = await s.ch.publish(V2);
      await asks(s, V2, d2, d1);
    },
  },
  {
    name: "a targets role signed by a revoked key",
    attack: async (s, d1) => {
      await rotateKey({ repo: s.ch.repo, keys: s.ch.keys, role: "targets" });
      await readsSince(s, 1);
      const revoked = await s.ch.keysOf("targets", "revoked");
      const d2 = await s.ch.publishSignedBy(V2, revoked);
      await asks(s, V2, d2, d1);
      await refused(s, "SignatureThreshold", "targets");
      await refreshChannel({ repo: s.ch.repo, keys: s.ch.keys, targets: true });
    },
  },
  {
    name: "a threshold of one where two are required",
    scene: [{}, { roles: { targets: { keys: 2, threshold: 2 } } }],
    attack: async (s, d1) => {
      const [one] = await s.ch.keysOf("targets");
      const d2 = await s.ch.publishSignedBy(V2, [one!]);
      await asks(s, V2, d2, d1);
      await refused(s, "SignatureThreshold", "targets");
      await refreshChannel({ repo: s.ch.repo, keys: s.ch.keys, targets: true });
    },
  },
  {
    name: "a root rotation that skips a version",
    attack: async (s, d1) => {
      const tuf = tufDir(s.ch.repo);
      const hold = await s.ch.save();
      // Two rotations signed by the same root keys: version 3 passes every signature check of
      // the trusted version 1, and only the version check can refuse it.
      await rotateKey({ repo: s.ch.repo, keys: s.ch.keys, role: "targets" });
      await rotateKey({ repo: s.ch.repo, keys: s.ch.keys, role: "targets" });
      const real2 = await readFile(path.join(tuf, "2.root.json"));
      // The mirror serves version 3 where version 2 belongs.
      await writeFile(path.join(tuf, "2.root.json"), await readFile(path.join(tuf, "3.root.json")));
      const d2 = await s.ch.publish(V2);
      await asks(s, V2, d2, d1);
      await refused(s, "RootRotationInvalid", "root");
      await writeFile(path.join(tuf, "2.root.json"), real2);
      await rm(hold, { recursive: true, force: true });
    },
  },
  {
    name: "a target whose hash does not match",
    attack: async (s, d1) => {
      const d2 = await s.ch.publish(V2);
      const file = path.join(tufDir(s.ch.repo), "targets", "stable", V2, "release.yaml");
      const good = await readFile(file);
      await asks(s, V2, d2, d1);
      // Same length, one byte changed: only the hash can tell.
      const bad = Buffer.from(good);
      bad[bad.length - 2] = bad[bad.length - 2] === 0x41 ? 0x42 : 0x41;
      await writeFile(file, bad);
      await refused(s, "LengthOrHashMismatch", "target");
      await writeFile(file, good);
    },
  },
  {
    name: "mix-and-match of metadata from two channels",
    attack: async (s, d1) => {
      const other = await testChannel();
      try {
        const own = await s.ch.save();
        const d2 = await other.publish(V2);
        for (const f of ["timestamp.json", "snapshot.json", "targets.json"]) {
          await cp(path.join(tufDir(other.repo), f), path.join(tufDir(s.ch.repo), f));
        }
        await asks(s, V2, d2, d1);
        await refused(s, "SignatureThreshold", "timestamp");
        await s.ch.serveSaved(own);
        const good2 = await s.ch.publish(V2);
        expect(good2).toBe(d2);
      } finally {
        await other.close();
      }
    },
  },
];

describe.concurrent(
  "hostile channels: the fleet does not move, the condition names the fault, the good channel is followed again",
  () => {
    it.each(HOSTILE.map((h) => [h.name, h] as const))(
      "%s",
      async (_name, { scene: args = [], attack }) => {
        const s = await scene(...args);
        try {
          const d1 = (await trusted(s, V1)).status!.trust!.target!.digest;
          await attack(s, d1);
          await followed(s, V2);
        } finally {
          await s.close();
        }
      },
      120_000,
    );

    it("a digest changed under the same version (signed with the right keys)", async () => {
      // An hour's delay: the Cluster trusts V2's metadata without taking it.
      const s = await scene({ follow: { delaySeconds: 3600 } });
      try {
        await trusted(s, undefined);
        const d2 = await s.ch.publish(V2);
        await readsSince(s, 1);
        const before = await s.ch.save();
        const keys = await s.ch.keysOf("targets");
        const rebuilt = await s.ch.publishSignedBy(V2, keys, "another build\n");
        expect(rebuilt).not.toBe(d2);
        await asks(s, V2, rebuilt, `sha256:${"0".repeat(64)}`);
        await refused(s, "DigestChanged", "targets");
        await s.ch.serveSaved(before);
        const d3 = await s.ch.publish(V3, "stable", { now: new Date(Date.now() - 2 * 3600_000) });
        await asks(s, V3, d3, `sha256:${"0".repeat(64)}`);
        await followed(s, V3);
      } finally {
        await s.close();
      }
    }, 120_000);

    it("a recall replayed as a release", async () => {
      // V2 waits out an hour's delay, so the Cluster reads it, then its recall, without taking it.
      const hourAgo = () => new Date(Date.now() - 2 * 3600_000);
      const t = await scene({ follow: { delaySeconds: 3600 } });
      try {
        // V1 was published now: with the delay it is not taken either; the Cluster trusts nothing yet.
        await trusted(t, undefined);
        const d2 = await t.ch.publish(V2);
        await readsSince(t, 1);
        const beforeRecall = await t.ch.save();
        await recallRelease({
          repo: t.ch.repo,
          keys: t.ch.keys,
          channel: "stable",
          version: V2,
          reason: "bad build",
        });
        await readsSince(t, 1);
        const recalled = await t.ch.save();
        const d1 = `sha256:${"0".repeat(64)}`;
        await asks(t, V2, d2, d1);
        await t.ch.serveSaved(beforeRecall);
        await refused(t, "MetadataRollback", "timestamp");
        await t.ch.serveSaved(recalled);
        const d3 = await t.ch.publish(V3, "stable", { now: hourAgo() });
        await asks(t, V3, d3, d1);
        await followed(t, V3);
        expect((await api.clusters.get(t.cluster)).status?.trust?.newest?.version).toBe(V3);
      } finally {
        await t.close();
      }
    }, 120_000);

    it("an air-gapped fleet accepts expired metadata up to its bound, and says so", async () => {
      const s = await scene({ acceptExpiredSeconds: 7 * 24 * 3600 });
      try {
        const d1 = (await trusted(s, V1)).status!.trust!.target!.digest;
        const d2 = await s.ch.publish(V2, "stable", { now: new Date(Date.now() - 3 * DAY_MS) });
        await asks(s, V2, d2, d1);
        await followed(s, V2);
        const c = await api.clusters.get(s.cluster);
        expect(c.status?.trust?.freshness).toMatch(/^expired .* accepted$/);
      } finally {
        await s.close();
      }
    }, 120_000);
  },
);

// The clock attacks move the operator's wall clock (`offset`), which every Cluster's trust read
// uses: they run one at a time, after every test above has ended.
describe("the operator's clock", () => {
  it("a clock far in the future, then far in the past", async () => {
    const s = await scene();
    try {
      const d1 = (await trusted(s, V1)).status!.trust!.target!.digest;
      offset = 400 * DAY_MS;
      const d2 = await s.ch.publish(V2);
      await asks(s, V2, d2, d1);
      // 400 days on: past even the root's year; the first check (TUF 5.3.10) names the root.
      await refused(s, "MetadataExpired", "root");
      offset = 0;
      await followed(s, V2);
      await writeStatus(s.machine, { version: V2, digest: d2, step: "Ready" });
      await turnReleased(s);
      offset = -400 * DAY_MS;
      await refused(s, "ClockBehind", "timestamp");
      offset = 0;
      await trusted(s, V2);
    } finally {
      offset = 0;
      await s.close();
    }
  }, 120_000);

  // Issue 38, 2.6: the check made while the clock ran ahead must not freeze the fleet once the
  // clock is right again, nor tell the person to fix it: the API server's stamps on the
  // Cluster say this clock is right (src/release-decision/clock.ts).
  it("a check made while the clock ran 2 hours ahead does not freeze the fleet once it is fixed", async () => {
    const s = await scene();
    try {
      const d1 = (await trusted(s, V1)).status!.trust!.target!.digest;
      offset = 2 * 3600_000;
      await waitFor(
        `${s.cluster}: a verification on the clock 2 h ahead`,
        async () => {
          const v = (await api.clusters.get(s.cluster)).status?.trust?.verifiedAt;
          return v !== undefined && Date.parse(v) > Date.now() + 3600_000;
        },
        { timeoutMs: 30_000, intervalMs: 200 },
      );
      offset = 0;
      const d2 = await s.ch.publish(V2);
      await asks(s, V2, d2, d1);
      await followed(s, V2);
      const c = await cond(s.cluster);
      expect(c?.reason).toBe("MetadataVerified");
      expect(c?.message).not.toMatch(/fix this operator's clock/);
    } finally {
      offset = 0;
      await s.close();
    }
  }, 120_000);

  // Issue 38, 2.3: TUF's freeze attack. What an unreachable channel vouched for holds until its
  // metadata expires (acceptExpiredSeconds included), not longer.
  it("trust expired while the channel is unreachable: no new turn, and the condition says so", async () => {
    const s = await scene({ acceptExpiredSeconds: 3600 });
    let closed = false;
    try {
      const d1 = (await trusted(s, V1)).status!.trust!.target!.digest;
      const d2 = await s.ch.publish(V2);
      await trusted(s, V2);
      await s.ch.server.close();
      closed = true;
      await waitFor(
        `${s.cluster}: ChannelReachable False`,
        async () =>
          (await api.clusters.get(s.cluster)).status?.conditions?.find(
            (x) => x.type === "ChannelReachable" && x.status === "False",
          ),
        { timeoutMs: 30_000, intervalMs: 200 },
      );
      // Unreachable, not expired: what it vouched for still holds.
      expect((await api.clusters.get(s.cluster)).status?.trust?.target?.version).toBe(V2);
      // Two days on: past the timestamp's day and the hour accepted.
      offset = 2 * DAY_MS;
      const c = await distrusted(s, "MetadataExpired");
      expect(c.message).toMatch(/trust expired at .* while the channel was unreachable/);
      expect(c.message).toContain("acceptExpiredSeconds 3600");
      await asks(s, V2, d2, d1);
      await twoMoreReads(s, "unreachable");
      const after = await api.clusters.get(s.cluster);
      expect(after.status?.rebootTurns ?? []).toEqual([]);
      expect(after.status?.trust?.target).toBeUndefined();
      expect((await cond(s.cluster))?.reason).toBe("MetadataExpired");
    } finally {
      offset = 0;
      if (closed) {
        s.beats.stop();
        await deleteAll(s.cluster, [s.machine]);
        await rm(path.dirname(s.ch.repo), { recursive: true, force: true });
      } else {
        await s.close();
      }
    }
  }, 120_000);
});
