// `liken promote`'s pure parts as tables: the policy (src/promote/policy.ts) and the check of a
// ring's evidence against it (src/promote/check.ts): what is promoted, and each refusal with the
// context and Cluster it names.
import { describe, expect, it } from "vitest";
import type { Cluster, ReleaseEvidence } from "../../src/api/types.js";
import { checkEvidence, type SourceRelease } from "../../src/promote/check.js";
import { distinctClusters } from "../../src/promote/distinct.js";
import { parsePolicy, unmeetable, type Policy } from "../../src/promote/policy.js";
import type { ClusterRead } from "../../src/promote/read.js";
import { isLikenError } from "../../src/errors.js";

const ROOT = `sha256:${"r".repeat(64)}`;
const V = "2026.12.01-001";
const D = `sha256:${"d".repeat(64)}`;
const OTHER = `sha256:${"e".repeat(64)}`;
const NOW = new Date("2026-12-05T12:00:00Z");
const HOURS_AGO = (h: number) =>
  new Date(NOW.getTime() - h * 3600_000).toISOString().replace(/\.\d{3}Z$/, "Z");
const source: SourceRelease = { channel: "canary", rootDigest: ROOT, version: V, digest: D };

const read = (
  name: string,
  evidence: Partial<ReleaseEvidence>[] | undefined,
  trust: { channel?: string; rootDigest?: string } = {},
): ClusterRead => ({
  context: `ctx-${name}`,
  server: `https://${name}`,
  readAt: NOW,
  cluster: {
    apiVersion: "liken.sh/v1alpha1",
    kind: "Cluster",
    metadata: { name, uid: `uid-${name}` },
    spec: {
      releases: {
        source: "https://channel/",
        trust: { mode: "channel", channel: "canary", rootDigest: ROOT, follow: {}, ...trust },
      },
    },
    status: {
      ...(evidence === undefined
        ? {}
        : {
            evidence: evidence.map((e) => ({
              version: V,
              digest: D,
              provenMachines: 0,
              failedTrials: 0,
              ...e,
            })),
          }),
    },
  } as Cluster,
});
const proved = (machines: number, hours: number): Partial<ReleaseEvidence> => ({
  provenMachines: machines,
  firstProvenAt: HOURS_AGO(hours),
  lastProvenAt: HOURS_AGO(hours),
});
const policy = (p: Partial<Policy> = {}): Policy => ({
  clusters: 2,
  machines: 5,
  failedTrials: 0,
  soakSeconds: 24 * 3600,
  ...p,
});

describe("policy", () => {
  it.each<[string, unknown, string | Policy]>([
    [
      "flags",
      { clusters: 3, machines: 20, soakSeconds: 86400 },
      { clusters: 3, machines: 20, failedTrials: 0, soakSeconds: 86400 },
    ],
    ["no clusters", { machines: 3 }, "clusters must be a whole number"],
    ["0 clusters", { clusters: 0 }, "clusters must be at least 1"],
    ["a negative soak", { clusters: 1, soakSeconds: -1 }, "soakSeconds must be 0 or more"],
    ["an unknown key", { clusters: 1, machine: 3 }, "is not a policy field"],
    ["a fraction", { clusters: 1.5 }, "clusters must be a whole number"],
  ])("%s", (_n, raw, want) => {
    if (typeof want !== "string") return expect(parsePolicy(raw, "p.yaml")).toEqual(want);
    let err: unknown;
    try {
      parsePolicy(raw, "p.yaml");
    } catch (e) {
      err = e;
    }
    expect(isLikenError(err, "LIKEN_PROMOTE_POLICY_INVALID")).toBe(true);
    expect((err as Error).message).toContain(want);
  });
  it("a policy asking more clusters than contexts can never be met", () => {
    expect(unmeetable(policy({ clusters: 3 }), 2)).toContain("clusters 3: only 2 context(s)");
    expect(unmeetable(policy({ clusters: 2 }), 2)).toBeUndefined();
  });
});

describe("the ring's evidence against the policy", () => {
  it.each<[string, ClusterRead[], Partial<Policy>, string, string[]]>([
    [
      "two clusters, 6 machines, a day soaked: promoted",
      [read("a", [proved(4, 25)]), read("b", [proved(2, 30)])],
      {},
      "ok",
      [],
    ],
    [
      "a lagging third cluster does not block, and is told",
      [read("a", [proved(4, 25)]), read("b", [proved(2, 30)]), read("c", [])],
      {},
      "ok",
      ["context ctx-c, Cluster c has no machine that proved"],
    ],
    [
      "a cluster on another channel is refused whatever the rest shows",
      [read("a", [proved(4, 25)]), read("b", [proved(2, 30)], { channel: "stable" })],
      {},
      "LIKEN_PROMOTE_WRONG_CHANNEL",
      ["context ctx-b, Cluster b follows channel stable"],
    ],
    [
      "a cluster pinning another root is refused",
      [read("a", [proved(4, 25)], { rootDigest: `sha256:${"x".repeat(64)}` })],
      { clusters: 1, machines: 1 },
      "LIKEN_PROMOTE_WRONG_CHANNEL",
      ["not the source channel canary"],
    ],
    [
      "evidence about another digest under the same version is refused",
      [read("a", [proved(4, 25)]), read("b", [{ ...proved(2, 30), digest: OTHER }])],
      {},
      "LIKEN_PROMOTE_OTHER_DIGEST",
      [`context ctx-b, Cluster b shows evidence about ${V} with digest ${OTHER}`],
    ],
    [
      "too few machines: says how many",
      [read("a", [proved(2, 25)]), read("b", [proved(2, 30)])],
      {},
      "LIKEN_PROMOTE_EVIDENCE_SHORT",
      ["4 machine(s) proved it over the counted clusters, the policy asks 5"],
    ],
    [
      "a cluster not soaked long enough: which, and how long",
      [read("a", [proved(4, 25)]), read("b", [proved(2, 1)])],
      {},
      "LIKEN_PROMOTE_EVIDENCE_SHORT",
      [
        "context ctx-b, Cluster b ran 2026.12.01-001 3600 s without a revert, the policy asks 86400 s",
        "1 cluster(s) count, the policy asks 2",
      ],
    ],
    [
      "a failed trial anywhere in the ring",
      [read("a", [{ ...proved(4, 25), failedTrials: 1 }]), read("b", [proved(2, 30)])],
      {},
      "LIKEN_PROMOTE_EVIDENCE_SHORT",
      [
        "1 failed trial(s) of 2026.12.01-001 in the ring (context ctx-a, Cluster a: 1), the policy allows 0",
      ],
    ],
    [
      "a revert vetoes even when enough others count",
      [
        read("a", [proved(4, 25)]),
        read("b", [proved(2, 30)]),
        read("c", [{ ...proved(1, 26), revertedAt: HOURS_AGO(2) }]),
      ],
      {},
      "LIKEN_PROMOTE_EVIDENCE_SHORT",
      ["context ctx-c, Cluster c reverted 2026.12.01-001"],
    ],
    [
      "a recall seen by a cluster vetoes",
      [read("a", [proved(4, 25)]), read("b", [{ ...proved(2, 30), recalledAt: HOURS_AGO(1) }])],
      { clusters: 1, machines: 1 },
      "LIKEN_PROMOTE_EVIDENCE_SHORT",
      ["context ctx-b, Cluster b saw 2026.12.01-001 recalled"],
    ],
  ])("%s", (_n, reads, p, code, lines) => {
    const r = checkEvidence({ source, reads, policy: policy(p), now: NOW });
    const said = r.ok ? r.notes : r.problems;
    expect(r.ok ? "ok" : r.code).toBe(code);
    for (const l of lines) expect(said.join("\n")).toContain(l);
  });

  it("the signed evidence names each counted cluster and what it showed", () => {
    const r = checkEvidence({
      source,
      reads: [read("a", [proved(4, 25)]), read("b", [proved(2, 30)]), read("c", [])],
      policy: policy(),
      now: NOW,
    });
    if (!r.ok) throw new Error(r.problems.join("; "));
    expect(r.evidence).toMatchObject({
      from: "canary",
      version: V,
      digest: D,
      promotedAt: "2026-12-05T12:00:00Z",
    });
    expect(
      r.evidence.clusters.map((c) => [c.context, c.cluster, c.uid, c.machines, c.soakSeconds]),
    ).toEqual([
      ["ctx-a", "a", "uid-a", 4, 25 * 3600],
      ["ctx-b", "b", "uid-b", 2, 30 * 3600],
    ]);
  });
});

describe("one Cluster read through several contexts counts once", () => {
  // A second context of cluster a: another ServiceAccount, another URL of the same API server.
  const again = (r: ClusterRead, context: string, server = r.server): ClusterRead => ({
    ...r,
    context,
    server,
  });

  it("two contexts of one Cluster are one cluster and its machines once: short, and told why", () => {
    const a = read("a", [proved(4, 25)]);
    const r = checkEvidence({
      source,
      reads: [a, again(a, "ctx-a-ops", "https://a.example")],
      policy: policy(),
      now: NOW,
    });
    expect(r.ok ? "ok" : r.code).toBe("LIKEN_PROMOTE_EVIDENCE_SHORT");
    if (r.ok) return;
    expect(r.problems).toEqual([
      "contexts ctx-a (https://a), ctx-a-ops (https://a.example) read the same Cluster a (uid uid-a): it counts once, as read through ctx-a",
      "1 cluster(s) count, the policy asks 2",
      "4 machine(s) proved it over the counted clusters, the policy asks 5",
    ]);
  });

  it("a --context given twice signs its Cluster once, and says so", () => {
    const a = read("a", [proved(4, 25)]);
    const r = checkEvidence({
      source,
      reads: [a, read("b", [proved(2, 30)]), again(a, "ctx-a")],
      policy: policy(),
      now: NOW,
    });
    if (!r.ok) throw new Error(r.problems.join("; "));
    expect(r.evidence.clusters.map((c) => [c.context, c.uid, c.machines])).toEqual([
      ["ctx-a", "uid-a", 4],
      ["ctx-b", "uid-b", 2],
    ]);
    expect(r.same).toEqual([
      "contexts ctx-a (https://a), ctx-a (https://a) read the same Cluster a (uid uid-a): it counts once, as read through ctx-a",
    ]);
  });

  it("a failed trial seen through two contexts is one failed trial", () => {
    const a = read("a", [{ ...proved(4, 25), failedTrials: 1 }]);
    const r = checkEvidence({
      source,
      reads: [a, again(a, "ctx-a-ops"), read("b", [proved(2, 30)])],
      policy: policy({ failedTrials: 1 }),
      now: NOW,
    });
    expect(r.ok ? "ok" : r.problems).toBe("ok");
  });
});

describe("distinctClusters", () => {
  const at = (r: ClusterRead, readAt: Date, context: string): ClusterRead => ({
    ...r,
    readAt,
    context,
  });
  const noUid = (r: ClusterRead): ClusterRead => ({
    ...r,
    cluster: { ...r.cluster, metadata: { name: r.cluster.metadata.name } },
  });

  it("keeps one read per uid, the latest, in the order first given", () => {
    const a = read("a", [proved(4, 25)]);
    const later = at(read("a", [proved(5, 26)]), new Date(NOW.getTime() + 1000), "ctx-a-2");
    const d = distinctClusters([a, read("b", []), later]);
    expect(d.reads.map((r) => [r.context, r.cluster.metadata.name])).toEqual([
      ["ctx-a-2", "a"],
      ["ctx-b", "b"],
    ]);
    expect(d.same).toHaveLength(1);
  });

  it("Clusters of one name on two API servers are two (their uids differ)", () => {
    const one = read("a", []);
    const two: ClusterRead = {
      ...read("a", []),
      context: "ctx-other",
      server: "https://other",
      cluster: { ...one.cluster, metadata: { name: "a", uid: "uid-other" } },
    };
    expect(distinctClusters([one, two])).toEqual({ reads: [one, two], same: [] });
  });

  it("without a uid, a read is named by its server and name", () => {
    const a = noUid(read("a", []));
    const sameServer = { ...a, context: "ctx-a-2" };
    const otherServer = { ...a, context: "ctx-x", server: "https://x" };
    const d = distinctClusters([a, sameServer, otherServer]);
    expect(d.reads.map((r) => r.context)).toEqual(["ctx-a", "ctx-x"]);
    expect(d.same).toEqual([
      "contexts ctx-a (https://a), ctx-a-2 (https://a) read the same Cluster a (no uid): it counts once, as read through ctx-a",
    ]);
  });
});

describe("the soak runs only while the Cluster's operator watched it", () => {
  // status.channel.lastCheckTime: the operator writes it on each read of the channel (every
  // 5 min by default), so it is the last time a live operator wrote this status.
  const lastLooked = (r: ClusterRead, hoursAgo: number): ClusterRead => ({
    ...r,
    cluster: {
      ...r.cluster,
      status: { ...r.cluster.status, channel: { lastCheckTime: HOURS_AGO(hoursAgo) } },
    },
  });

  it("an operator that stopped a day ago froze its cluster's soak: it does not count", () => {
    const r = checkEvidence({
      source,
      reads: [
        lastLooked(read("a", [proved(4, 26)]), 25),
        lastLooked(read("b", [proved(2, 30)]), 0),
      ],
      policy: policy(),
      now: NOW,
    });
    expect(r.ok ? "ok" : r.code).toBe("LIKEN_PROMOTE_EVIDENCE_SHORT");
    if (r.ok) return;
    expect(r.problems).toEqual([
      `context ctx-a, Cluster a ran ${V} 3600 s without a revert, the policy asks 86400 s (since ${HOURS_AGO(26)}; its operator last wrote its status at ${HOURS_AGO(25)}: a soak nobody watched is not counted)`,
      "1 cluster(s) count, the policy asks 2",
      "2 machine(s) proved it over the counted clusters, the policy asks 5",
    ]);
  });

  it("the signed soak ends when the operator last looked, not when promote read", () => {
    const r = checkEvidence({
      source,
      reads: [lastLooked(read("a", [proved(4, 30)]), 2), read("b", [proved(2, 30)])],
      policy: policy(),
      now: NOW,
    });
    if (!r.ok) throw new Error(r.problems.join("; "));
    expect(r.evidence.clusters.map((c) => [c.cluster, c.soakSeconds])).toEqual([
      ["a", 28 * 3600],
      ["b", 30 * 3600],
    ]);
  });
});
