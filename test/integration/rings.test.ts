// Rings of clusters on TWO real control planes: the leased one (ring member A, and the next
// ring's followers) and a second one this file starts and stops itself (ring member B), each
// with its own cluster-operator. A release proves itself on both canary clusters (status.evidence
// written by the operators; each machine has a Node a kubelet booted, one without proves
// nothing), `liken promote` reads that through read-only ServiceAccount contexts and signs it
// into stable with the evidence; refusals name the context; a follower
// that requires more evidence than was signed holds with what is missing; a mirror that changes
// the evidence without the keys is refused like any bad metadata.
import { randomUUID } from "node:crypto";
import { readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import { performance } from "node:perf_hooks";
import {
  CoreV1Api,
  KubeConfig,
  PatchStrategy,
  RbacAuthorizationV1Api,
  setHeaderOptions,
} from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LikenApi } from "../../src/api/client.js";
import { HeartbeatClient } from "../../src/api/heartbeat.js";
import { loadKubeConfig } from "../../src/api/kubeconfig.js";
import type { Cluster, RequireEvidence } from "../../src/api/types.js";
import { REPO_ROOT } from "../../src/controlplane/paths.js";
import { isLikenError } from "../../src/errors.js";
import { createNode } from "../../src/lab/fleet.js";
import { bootStatusPatch } from "../../src/lab/kubelet.js";
import type { Logger } from "../../src/operator/logger.js";
import { Operator } from "../../src/operator/run/operator.js";
import { promote } from "../../src/promote/promote.js";
import type { Policy } from "../../src/promote/policy.js";
import { parseContextRef } from "../../src/promote/read.js";
import { recallRelease, tufDir } from "../../src/release/tuf.js";
import { applyManifests } from "../support/apply.js";
import { upOwned, type OwnedControlPlane } from "../support/controlplane-owned.js";
import { kubeConfig, uniqueName, waitFor } from "../support/kube.js";
import { testChannel, type TestChannel } from "../support/tuf-channel.js";
import { ensureNamespaces, tempDir } from "./operator-fleet.js";

const V = "2026.12.01-001";
/**
 * The operators' channel interval. Every Cluster here is created after what it must read is
 * signed (its first read comes at once), so only the recall waits on the interval: long enough
 * that "within one interval" means something beside the read and the status write.
 */
const INTERVAL_MS = 5_000;
const quiet: Logger = { info: () => undefined, warn: () => undefined, error: () => undefined };

interface Plane {
  kc: KubeConfig;
  api: LikenApi;
  op: Operator;
  beats: HeartbeatClient;
}

let second: OwnedControlPlane | undefined;
let A: Plane;
let B: Plane;
let ch: TestChannel;
let digest: string;
let kubeconfigFile: string;
const timers: NodeJS.Timeout[] = [];
const made: { plane: Plane; kind: "clusters" | "machines"; name: string }[] = [];
const nodes: { plane: Plane; name: string }[] = [];

/**
 * A Node as a kubelet leaves it once it ran in a boot: kwok keeps it Ready, and the boot's
 * status carries a bootID (src/lab/kubelet.ts). Without one a machine proves nothing. The boot's
 * status is posted once kwok has initialized the Node (phase Running): kwok writes the whole
 * status from the object it read, so a bootID posted in between would be written over with "".
 */
async function bootedNode(p: Plane, name: string): Promise<void> {
  const core = p.kc.makeApiClient(CoreV1Api);
  await createNode(p.kc, name);
  nodes.push({ plane: p, name });
  await waitFor(`Node ${name} initialized by kwok`, async () => {
    const n = await core.readNode({ name });
    return n.status?.phase === "Running";
  });
  const bootID = randomUUID();
  await core.patchNodeStatus(
    { name, body: bootStatusPatch(bootID, new Date()) },
    setHeaderOptions("Content-Type", PatchStrategy.StrategicMergePatch),
  );
  await waitFor(`Node ${name} shows bootID ${bootID}`, async () => {
    const n = await core.readNode({ name });
    return n.status?.nodeInfo?.bootID === bootID;
  });
}

function operatorOn(kc: KubeConfig): Operator {
  return new Operator(kc, {
    identity: uniqueName("op-rings"),
    startGraceSeconds: 1,
    leaderElection: false,
    channelIntervalMs: INTERVAL_MS,
    log: quiet,
    clocks: { wall: () => Date.now(), mono: () => performance.now() },
  });
}

async function namespaces(kc: KubeConfig): Promise<void> {
  const core = kc.makeApiClient(CoreV1Api);
  for (const name of ["liken-heartbeats", "liken-system"]) {
    await core.createNamespace({ body: { metadata: { name } } }).catch(() => undefined);
  }
}

/** A ServiceAccount that may only get/list Clusters, and a kubeconfig user with its token. */
async function readOnlyUser(kc: KubeConfig, tag: string): Promise<string> {
  const core = kc.makeApiClient(CoreV1Api);
  const rbac = kc.makeApiClient(RbacAuthorizationV1Api);
  const name = uniqueName(`promote-reader-${tag}`);
  await core.createNamespacedServiceAccount({
    namespace: "liken-system",
    body: { metadata: { name } },
  });
  await rbac.createClusterRole({
    body: {
      metadata: { name },
      rules: [
        { apiGroups: ["liken.sh"], resources: ["clusters"], verbs: ["get", "list", "watch"] },
      ],
    },
  });
  await rbac.createClusterRoleBinding({
    body: {
      metadata: { name },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name },
      subjects: [{ kind: "ServiceAccount", name, namespace: "liken-system" }],
    },
  });
  const t = await core.createNamespacedServiceAccountToken({
    name,
    namespace: "liken-system",
    body: { spec: { audiences: [], expirationSeconds: 3600 } },
  });
  return t.status?.token ?? "";
}

/** One kubeconfig with a read-only and an admin context per plane, and one that answers nothing. */
async function contexts(): Promise<string> {
  const file = path.join(tempDir("liken-rings-"), "kubeconfig");
  const clusters = [];
  const users = [];
  const ctxs = [];
  for (const [tag, p] of [
    ["a", A],
    ["b", B],
  ] as const) {
    const c = p.kc.getCurrentCluster()!;
    const u = p.kc.getCurrentUser()!;
    clusters.push({ ...c, name: `plane-${tag}` });
    users.push({ ...u, name: `admin-${tag}` });
    users.push({ name: `reader-${tag}`, token: await readOnlyUser(p.kc, tag) });
    ctxs.push({ name: `ring-${tag}`, cluster: `plane-${tag}`, user: `reader-${tag}` });
    ctxs.push({ name: `admin-${tag}`, cluster: `plane-${tag}`, user: `admin-${tag}` });
  }
  clusters.push({ name: "nowhere", server: "https://127.0.0.1:9", skipTLSVerify: true });
  ctxs.push({ name: "gone", cluster: "nowhere", user: "reader-a" });
  const kc = new KubeConfig();
  kc.loadFromOptions({ clusters, users, contexts: ctxs, currentContext: "ring-a" });
  await writeFile(file, kc.exportConfig());
  return file;
}

async function follower(
  p: Plane,
  channel: string,
  extra: { requireEvidence?: RequireEvidence } = {},
): Promise<string> {
  const name = uniqueName(`ring-${channel}`);
  await p.api.clusters.create({
    apiVersion: "liken.sh/v1alpha1",
    kind: "Cluster",
    metadata: { name },
    spec: {
      releases: {
        source: `${ch.source}/`,
        trust: { mode: "channel", channel, rootDigest: ch.rootDigest, follow: { ...extra } },
      },
      disruption: { maxUnavailable: 1 },
    },
  });
  made.push({ plane: p, kind: "clusters", name });
  return name;
}

/** A canary cluster with `n` machines that run V Ready, their heartbeats kept. */
async function canary(p: Plane, n: number): Promise<string> {
  const cluster = await follower(p, "canary");
  const names: string[] = [];
  for (let i = 0; i < n; i++) {
    const name = uniqueName(`${cluster}-m${i}`);
    const m = await p.api.machines.create({
      apiVersion: "liken.sh/v1alpha1",
      kind: "Machine",
      metadata: { name, labels: { "liken.sh/cluster": cluster } },
      spec: { cluster, nodeName: name, role: "Worker", rebootPolicy: "Auto" },
    });
    made.push({ plane: p, kind: "machines", name });
    await bootedNode(p, name);
    await p.api.machines.updateStatus(m.metadata.name, (cur) => ({
      ...cur,
      status: { version: V, digest, step: "Ready" },
    }));
    names.push(name);
  }
  const beat = (): void => {
    for (const m of names) void p.beats.renew(m, cluster).catch(() => undefined);
  };
  beat();
  timers.push(setInterval(beat, 500));
  return cluster;
}

const policy = (p: Partial<Policy> = {}): Policy => ({
  clusters: 2,
  machines: 3,
  failedTrials: 0,
  soakSeconds: 0,
  ...p,
});

async function refusal(p: Promise<unknown>): Promise<{ code: string; message: string }> {
  try {
    await p;
  } catch (e) {
    if (isLikenError(e)) return { code: e.code, message: e.message };
    throw e;
  }
  throw new Error("promote signed where it had to refuse");
}

const run = (ctx: string[], p: Partial<Policy> = {}) =>
  promote({
    repo: ch.repo,
    keys: ch.keys,
    from: "canary",
    to: "stable",
    version: V,
    contexts: ctx.map(parseContextRef),
    kubeConfig: loadKubeConfig(kubeconfigFile),
    policy: policy(p),
  });

let ringA: string;
/** The stable ring's Clusters that trusted the promoted release (filled by the promote test). */
const followers: [Plane, string][] = [];
let ringB: string;

beforeAll(async () => {
  await ensureNamespaces();
  second = await upOwned(uniqueName("rings-b"), () => undefined);
  await applyManifests(second.state, path.join(REPO_ROOT, "config", "crd"));
  const kcB = loadKubeConfig(second.state.kubeconfig);
  await namespaces(kcB);
  const kcA = kubeConfig();
  A = {
    kc: kcA,
    api: new LikenApi(kcA, "liken-test"),
    op: operatorOn(kcA),
    beats: new HeartbeatClient(kcA),
  };
  B = {
    kc: kcB,
    api: new LikenApi(kcB, "liken-test"),
    op: operatorOn(kcB),
    beats: new HeartbeatClient(kcB),
  };
  await A.op.start();
  await B.op.start();
  ch = await testChannel();
  digest = await ch.publish(V, "canary");
  kubeconfigFile = await contexts();
  ringA = await canary(A, 2);
  ringB = await canary(B, 1);
  // Both operators recorded what their machines proved.
  for (const [p, c, n] of [
    [A, ringA, 2],
    [B, ringB, 1],
  ] as const) {
    await waitFor(
      `${c}'s status.evidence shows ${n} machine(s) proving ${V}`,
      async () => {
        const e = (await p.api.clusters.get(c)).status?.evidence?.find((x) => x.version === V);
        return e !== undefined && e.provenMachines === n && e.firstProvenAt !== undefined;
      },
      { timeoutMs: 120_000 },
    );
  }
}, 600_000);

afterAll(async () => {
  for (const t of timers) clearInterval(t);
  for (const m of made.reverse()) await m.plane.api[m.kind].delete(m.name).catch(() => undefined);
  for (const n of nodes) {
    await n.plane.kc
      .makeApiClient(CoreV1Api)
      .deleteNode({ name: n.name })
      .catch(() => undefined);
  }
  await A?.op.stop();
  await B?.op.stop();
  await ch?.close();
  await second?.stop();
}, 120_000);

describe("liken promote across two control planes", () => {
  it("the EVIDENCE column and the release metrics show what a canary proved", async () => {
    const c = await A.api.clusters.get(ringA);
    expect(c.status?.evidenceText).toMatch(new RegExp(`^${V}: 2 proven, 0 failed since `));
    const text = await A.op.metrics.registry.metrics();
    expect(text).toContain(
      `liken_operator_release_proven_machines{cluster="${ringA}",version="${V}"} 2`,
    );
  });

  it("refuses with the context: one that can write, one unreachable, an unmeetable policy, another channel, another digest, short evidence", async () => {
    const w = await refusal(run([`ring-a/${ringA}`, `admin-b/${ringB}`]));
    expect(w.code).toBe("LIKEN_PROMOTE_CONTEXT_CAN_WRITE");
    expect(w.message).toContain("context admin-b");
    const u = await refusal(run([`ring-a/${ringA}`, "gone"]));
    expect(u.code).toBe("LIKEN_PROMOTE_CONTEXT_UNREACHABLE");
    expect(u.message).toContain("context gone (https://127.0.0.1:9) cannot be reached");
    const n = await refusal(run([`ring-a/${ringA}`, `ring-b/${ringB}`], { clusters: 3 }));
    expect(n.code).toBe("LIKEN_PROMOTE_POLICY_UNMEETABLE");
    const other = await follower(A, "beta");
    const c = await refusal(run([`ring-a/${other}`, `ring-b/${ringB}`]));
    expect(c.code).toBe("LIKEN_PROMOTE_WRONG_CHANNEL");
    expect(c.message).toContain(`context ring-a, Cluster ${other} follows channel beta`);
    // A canary Cluster whose machine ran another build under the same version.
    const odd = await follower(B, "canary");
    const oddMachine = uniqueName(`${odd}-m`);
    await B.api.machines.create({
      apiVersion: "liken.sh/v1alpha1",
      kind: "Machine",
      metadata: { name: oddMachine, labels: { "liken.sh/cluster": odd } },
      spec: { cluster: odd, nodeName: oddMachine, role: "Worker", rebootPolicy: "Auto" },
    });
    made.push({ plane: B, kind: "machines", name: oddMachine });
    const otherDigest = `sha256:${"0".repeat(64)}`;
    await B.api.machines.updateStatus(oddMachine, (cur) => ({
      ...cur,
      status: { version: V, digest: otherDigest, step: "Ready" },
    }));
    const oddEntry = await waitFor(
      `${odd} records evidence about ${V} under another digest`,
      async () =>
        (await B.api.clusters.get(odd)).status?.evidence?.find(
          (e) => e.version === V && e.digest === otherDigest,
        ),
      { timeoutMs: 120_000 },
    );
    // Its machine says Ready, but it has no Node (no kubelet ever ran): it proves nothing.
    expect(oddEntry.provenMachines).toBe(0);
    const d = await refusal(run([`ring-a/${ringA}`, `ring-b/${odd}`]));
    expect(d.code).toBe("LIKEN_PROMOTE_OTHER_DIGEST");
    expect(d.message).toContain(
      `context ring-b, Cluster ${odd} shows evidence about ${V} with digest ${otherDigest}`,
    );
    const short = await refusal(run([`ring-a/${ringA}`, `ring-b/${ringB}`], { machines: 4 }));
    expect(short.code).toBe("LIKEN_PROMOTE_EVIDENCE_SHORT");
    expect(short.message).toContain(
      "3 machine(s) proved it over the counted clusters, the policy asks 4",
    );
    const targets = JSON.parse(await readFile(path.join(tufDir(ch.repo), "targets.json"), "utf8"));
    expect(Object.keys(targets.signed.targets)).not.toContain(`stable/${V}/release.yaml`);
  }, 180_000);

  it("promotes on evidence; requireEvidence holds a follower it falls short of; forged evidence is refused", async () => {
    const r = await run([`ring-a/${ringA}`, `ring-b/${ringB}`]);
    expect(r.signed).toBe(true);
    expect(r.evidence.clusters.map((c) => [c.context, c.cluster, c.machines])).toEqual([
      ["ring-a", ringA, 2],
      ["ring-b", ringB, 1],
    ]);
    const enough = await follower(A, "stable", { requireEvidence: { clusters: 2, machines: 3 } });
    const wants = await follower(A, "stable", { requireEvidence: { clusters: 3 } });
    const progressing = async (c: string) =>
      (await A.api.clusters.get(c)).status?.conditions?.find((x) => x.type === "Progressing");
    await waitFor(
      `${wants} holds ${V} for want of a third cluster`,
      async () => (await progressing(wants))?.message?.includes("3 cluster(s) (has 2)") === true,
      { timeoutMs: 120_000 },
    );
    await waitFor(
      `${enough} takes ${V} on the signed evidence`,
      async () => {
        const c: Cluster = await A.api.clusters.get(enough);
        const p = c.status?.conditions?.find((x) => x.type === "Progressing");
        return (
          c.status?.trust?.evidence?.clusters === 2 &&
          p !== undefined &&
          !p.message.includes("requireEvidence")
        );
      },
      { timeoutMs: 120_000 },
    );
    // A mirror raises the evidence without the keys: the whole channel is refused.
    const file = path.join(tufDir(ch.repo), "targets.json");
    const signedBytes = await readFile(file);
    const doc = JSON.parse(signedBytes.toString("utf8"));
    const t = doc.signed.targets[`stable/${V}/release.yaml`];
    t.custom.liken.evidence.clusters.push({
      ...t.custom.liken.evidence.clusters[0],
      cluster: "forged",
    });
    await writeFile(file, JSON.stringify(doc, null, 1));
    // A Cluster that already trusts this targets version keeps the signed one (the timestamp
    // names no newer snapshot); one that reads the channel now meets the forged file and
    // refuses the whole channel, with the role, as any changed metadata.
    const fresh = await follower(A, "stable", { requireEvidence: { clusters: 3 } });
    await waitFor(
      `${fresh} refuses the forged evidence`,
      async () => {
        const c = (await A.api.clusters.get(fresh)).status?.conditions?.find(
          (x) => x.type === "ChannelTrusted",
        );
        return c?.status === "False" && c.reason !== "MetadataVerified" ? c : undefined;
      },
      { timeoutMs: 120_000 },
    );
    const refused = await A.api.clusters.get(fresh);
    expect(refused.status?.trust?.target).toBeUndefined();
    expect(refused.status?.trust?.evidence).toBeUndefined();
    expect(refused.status?.conditions?.find((x) => x.type === "ChannelTrusted")?.message).toContain(
      "targets metadata",
    );
    // The Cluster that trusted the signed evidence never sees the forged third cluster.
    expect((await A.api.clusters.get(wants)).status?.trust?.evidence?.clusters).toBe(2);
    // The mirror serves the signed file again (the next test signs on top of it).
    await writeFile(file, signedBytes);
    followers.push([A, enough], [A, wants]);
  }, 400_000);

  // Issue 41, 5: a signed recall stops every following cluster, of every ring and on both
  // control planes, within one channel interval: each operator reads each Cluster's channel on
  // its own interval, whatever the others do. Measured by the read that first saw the recall
  // (status.trust.verifiedAt is that read's time), not by when this test happened to look.
  it("a signed recall reaches every ring's Clusters, on both control planes, within one interval", async () => {
    const rings: [Plane, string, string][] = [
      [A, ringA, "canary"],
      [B, ringB, "canary"],
      ...followers.map(([p, c]): [Plane, string, string] => [p, c, "stable"]),
    ];
    expect(rings).toHaveLength(4);
    // Every follower has read the channel since it was made: the recall waits on the interval.
    for (const [p, c] of rings)
      expect((await p.api.clusters.get(c)).status?.trust?.verifiedAt, c).toBeDefined();
    for (const channel of ["canary", "stable"])
      await recallRelease({ repo: ch.repo, keys: ch.keys, channel, version: V, reason: "rings" });
    const signedAt = Date.now();
    const seen = await Promise.all(
      rings.map(([p, c, channel]) =>
        waitFor(
          `${c} (channel ${channel}) sees ${V} recalled`,
          async () => {
            const t = (await p.api.clusters.get(c)).status?.trust;
            return t?.recalls?.some((r) => r.version === V) === true ? t.verifiedAt : undefined;
          },
          { timeoutMs: 4 * INTERVAL_MS + 60_000, intervalMs: 200 },
        ),
      ),
    );
    // verifiedAt has whole seconds: one more for its rounding, one for the read itself.
    const late = rings.flatMap(([, c], i) => {
      const after = Date.parse(seen[i]!) - signedAt;
      return after > INTERVAL_MS + 2_000 ? [`${c}: ${after} ms after the recall was signed`] : [];
    });
    console.log(
      `recall: read by ${rings.length} Clusters at ${seen.map((s) => `${Date.parse(s!) - signedAt} ms`).join(", ")} after it was signed (interval ${INTERVAL_MS} ms)`,
    );
    expect(late.join("; "), `the recall took longer than one interval (${INTERVAL_MS} ms)`).toBe(
      "",
    );
    const canary = (await A.api.clusters.get(ringA)).status?.conditions?.find(
      (x) => x.type === "ChannelTrusted",
    );
    expect(canary?.reason).toBe("ReleaseRecalled");
  }, 300_000);
});
