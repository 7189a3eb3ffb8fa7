// `liken promote`'s pure parts as tables: the policy (src/promote/policy.ts) and the check of a
// ring's evidence against it (src/promote/check.ts): what is promoted, and each refusal with the
// context and Cluster it names.
import { describe, expect, it } from "vitest";
import type { Cluster, ReleaseEvidence } from "../../src/api/types.js";
import { checkEvidence, type SourceRelease } from "../../src/promote/check.js";
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
