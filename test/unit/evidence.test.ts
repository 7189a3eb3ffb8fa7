// Evidence, as tables: what a Cluster records of each release it took (src/operator/status/evidence.ts),
// whether a followed release carries the signed evidence its Cluster requires
// (src/release-decision/evidence.ts, through the release decision), and which signed evidence the client
// reads at all (src/verify/evidence.ts).
import { describe, expect, it } from "vitest";
import type {
  Machine,
  MachineStatus,
  ReleaseEvidence,
  ReleaseRef,
  SignedEvidenceSummary,
} from "../../src/api/types.js";
import {
  evidenceOf,
  evidenceText,
  provingNodes,
  soakSecondsOf,
  uncountedNote,
} from "../../src/operator/status/evidence.js";
import { NODE_BOOT_FRESH_MS, type NodeBoot } from "../../src/operator/view/node-boot.js";
import { evidenceHoldMessage, shortfalls } from "../../src/release-decision/evidence.js";
import { decideRelease, type ReleaseInput } from "../../src/release-decision/decide.js";
import {
  evidenceOf as signedEvidenceOf,
  summaryOf,
  type ClusterEvidence,
  type SignedEvidence,
} from "../../src/verify/evidence.js";

const R = (v: string): ReleaseRef => ({
  version: `2026.11.0${v}-001`,
  digest: `sha256:${v.repeat(64)}`,
});
const V1 = R("1");
const V2 = R("2");
const NOW = new Date("2026-11-10T12:00:00Z");
const T0 = "2026-11-10T10:00:00Z";
const machine = (name: string, status: MachineStatus): Machine => ({
  apiVersion: "liken.sh/v1alpha1",
  kind: "Machine",
  metadata: { name },
  spec: { cluster: "c", nodeName: name },
  status,
});
const ready = (name: string, r: ReleaseRef): Machine =>
  machine(name, { version: r.version, digest: r.digest, step: "Ready" });

/** A Node a kubelet posted from a boot, Ready, read just now. */
const booted: NodeBoot = { bootID: "boot-1", ready: "True", readAt: NOW.getTime() };
const nodesOf = (over: Record<string, NodeBoot | undefined> = {}): Map<string, NodeBoot> =>
  new Map(
    Object.entries({ a: booted, b: booted, ...over }).filter(
      (e): e is [string, NodeBoot] => e[1] !== undefined,
    ),
  );

describe("status.evidence (operator/evidence.ts)", () => {
  const base = {
    before: undefined,
    machines: [] as Machine[],
    lost: new Set<string>(),
    nodes: nodesOf(),
    target: undefined,
    revoked: [],
    recalls: [],
    now: NOW,
  };
  const at = "2026-11-10T12:00:00Z";
  it.each<[string, Partial<Parameters<typeof evidenceOf>[0]>, Partial<ReleaseEvidence>[]]>([
    ["nothing known: no entry", {}, []],
    [
      "the target before any machine runs it: an entry with nothing proven",
      { target: V2 },
      [{ ...V2, provenMachines: 0, failedTrials: 0 }],
    ],
    [
      "two machines Ready on V2: proven by 2 since now",
      { target: V2, machines: [ready("a", V2), ready("b", V2)] },
      [{ ...V2, provenMachines: 2, failedTrials: 0, firstProvenAt: at, lastProvenAt: at }],
    ],
    [
      "a Lost machine proves nothing",
      { target: V2, machines: [ready("a", V2), ready("b", V2)], lost: new Set(["b"]) },
      [{ ...V2, provenMachines: 1, firstProvenAt: at }],
    ],
    [
      "a machine with no Node (none read) proves nothing",
      { target: V2, machines: [ready("a", V2), ready("b", V2)], nodes: nodesOf({ b: undefined }) },
      [{ ...V2, provenMachines: 1, firstProvenAt: at }],
    ],
    [
      "a Node no kubelet posted (no bootID) proves nothing",
      {
        target: V2,
        machines: [ready("a", V2), ready("b", V2)],
        nodes: nodesOf({ a: { ...booted, bootID: "" } }),
      },
      [{ ...V2, provenMachines: 1 }],
    ],
    [
      "a Node not Ready (its kubelet gone) proves nothing",
      {
        target: V2,
        machines: [ready("a", V2), ready("b", V2)],
        nodes: nodesOf({ a: { ...booted, ready: "Unknown" }, b: { ...booted, ready: undefined } }),
      },
      [{ ...V2, provenMachines: 0 }],
    ],
    [
      "a Node last read longer ago than its freshness proves nothing",
      {
        target: V2,
        machines: [ready("a", V2)],
        nodes: nodesOf({ a: { ...booted, readAt: NOW.getTime() - NODE_BOOT_FRESH_MS - 1 } }),
      },
      [{ ...V2, provenMachines: 0 }],
    ],
    [
      "a Node whose bootID is not the boot the machine reports from proves nothing",
      {
        target: V2,
        machines: [
          machine("a", { ...V2, step: "Ready", bootId: "boot-2" }),
          machine("b", { ...V2, step: "Ready", bootId: "boot-1" }),
        ],
      },
      [{ ...V2, provenMachines: 1 }],
    ],
    [
      "a machine that reports no digest proves no build of its version",
      { target: V2, machines: [machine("a", { version: V2.version, step: "Ready" })] },
      [{ ...V2, provenMachines: 0 }],
    ],
    [
      "a machine on V2 with another digest proves nothing of V2",
      { target: V2, machines: [machine("a", { ...V2, digest: V1.digest, step: "Ready" })] },
      [
        { ...V2, provenMachines: 0 },
        { version: V2.version, digest: V1.digest, provenMachines: 1 },
      ],
    ],
    [
      "counts never fall when machines move on, and the times stay",
      {
        before: [
          { ...V1, provenMachines: 3, failedTrials: 0, firstProvenAt: T0, lastProvenAt: T0 },
        ],
        machines: [ready("a", V2)],
      },
      [
        { ...V1, provenMachines: 3, firstProvenAt: T0, lastProvenAt: T0 },
        { ...V2, provenMachines: 1, firstProvenAt: at },
      ],
    ],
    [
      "a failed trial (failedReleases, lastTrial Failed) is counted per machine",
      {
        target: V2,
        machines: [
          machine("a", {
            ...V1,
            step: "Ready",
            failedReleases: [{ ...V2, reason: "TrialDidNotRejoin", at: T0 }],
          }),
          machine("b", {
            ...V1,
            step: "Ready",
            lastTrial: { ...V2, slot: "b", result: "Failed", at: T0, reason: "TrialDidNotRejoin" },
          }),
        ],
      },
      [
        { ...V2, failedTrials: 2, provenMachines: 0 },
        { ...V1, provenMachines: 2 },
      ],
    ],
    [
      "a revocation marks it reverted (its time), a recall recalled (now)",
      {
        before: [{ ...V2, provenMachines: 2, failedTrials: 1, firstProvenAt: T0 }],
        revoked: [{ ...V2, reason: "RevertedOnFailedTrials", at: "2026-11-10T11:00:00Z" }],
        recalls: [{ version: V2.version }],
      },
      [{ ...V2, revertedAt: "2026-11-10T11:00:00Z", recalledAt: at }],
    ],
  ])("%s", (_name, over, want) => {
    const got = evidenceOf({ ...base, ...over });
    expect(got).toHaveLength(want.length);
    want.forEach((w, i) => expect(got[i]).toMatchObject(w));
  });

  it("the EVIDENCE column says how many Ready machines are not counted, and why", () => {
    const i = {
      ...base,
      target: V2,
      machines: [ready("a", V2), ready("c", V2), ready("d", V2)],
      nodes: nodesOf({ d: { ...booted, bootID: "" } }),
    };
    const note = uncountedNote(i, V2);
    expect(note).toBe("2 Ready not counted (c: its Node was not read (it may not exist))");
    expect(evidenceText(evidenceOf(i), note)).toBe(
      `${V2.version}: 1 proven, 0 failed since 2026-11-10T12:00:00Z; ${note}`,
    );
    expect(uncountedNote({ ...i, machines: [ready("a", V2)] }, V2)).toBeUndefined();
  });

  it("reads the Nodes of Ready machines only while their release's count can grow", () => {
    const ms = [ready("a", V2), ready("b", V2), machine("c", { ...V2, step: "Downloading" })];
    expect([...provingNodes(ms, undefined)]).toEqual(["a", "b"]);
    const one = [{ ...V2, provenMachines: 1, failedTrials: 0 }];
    expect([...provingNodes(ms, one)]).toEqual(["a", "b"]);
    const two = [{ ...V2, provenMachines: 2, failedTrials: 0 }];
    expect([...provingNodes(ms, two)]).toEqual([]);
  });

  it("keeps at most 16 releases, the oldest leaving first", () => {
    const before = Array.from({ length: 16 }, (_, i) => ({
      version: `2026.10.${String(i + 10)}-001`,
      digest: `sha256:${"a".repeat(64)}`,
      provenMachines: 1,
      failedTrials: 0,
    }));
    const got = evidenceOf({ ...base, before, target: V2 });
    expect(got).toHaveLength(16);
    expect(got[0]!.version).toBe("2026.10.11-001");
    expect(got.at(-1)).toMatchObject(V2);
  });

  it("the soak runs from the first proof to now, or to the revert", () => {
    const e: ReleaseEvidence = { ...V2, provenMachines: 1, failedTrials: 0, firstProvenAt: T0 };
    expect(soakSecondsOf(e, NOW)).toBe(7200);
    expect(soakSecondsOf({ ...e, revertedAt: "2026-11-10T11:00:00Z" }, NOW)).toBe(3600);
    expect(soakSecondsOf({ ...V2, provenMachines: 0, failedTrials: 0 }, NOW)).toBe(0);
  });

  it("the EVIDENCE column shows the newest release", () => {
    expect(
      evidenceText([
        { ...V2, provenMachines: 3, failedTrials: 1, firstProvenAt: T0, revertedAt: T0 },
        { ...V1, provenMachines: 5, failedTrials: 0 },
      ]),
    ).toBe(`${V2.version}: 3 proven, 1 failed since ${T0} (reverted)`);
  });
});

const signed = (o: Partial<SignedEvidenceSummary> = {}): SignedEvidenceSummary => ({
  from: "canary",
  clusters: 3,
  machines: 20,
  failedTrials: 0,
  soakSeconds: 86400,
  promotedAt: T0,
  ...o,
});

describe("requireEvidence (target/evidence.ts)", () => {
  it.each<[string, Parameters<typeof shortfalls>[0], string[]]>([
    ["nothing required", { require: {}, signed: undefined }, []],
    ["zeros require nothing", { require: { clusters: 0, machines: 0 }, signed: undefined }, []],
    [
      "enough on every count",
      { require: { clusters: 3, machines: 20, soakSeconds: 86400 }, signed: signed() },
      [],
    ],
    ["no evidence at all", { require: { clusters: 1 }, signed: undefined }, ["clusters"]],
    ["one cluster short", { require: { clusters: 4 }, signed: signed() }, ["clusters"]],
    [
      "machines and soak short",
      { require: { machines: 21, soakSeconds: 86401 }, signed: signed() },
      ["machines", "soakSeconds"],
    ],
  ])("%s", (_n, i, want) => {
    expect(shortfalls(i).map((s) => s.field)).toEqual(want);
  });

  it("says what is missing and by how much", () => {
    const m = evidenceHoldMessage(V2, {
      require: { clusters: 4, soakSeconds: 90000 },
      signed: signed(),
    });
    expect(m).toContain("4 cluster(s) (has 3)");
    expect(m).toContain("90000 s of soak without a revert (has 86400)");
    expect(m).toContain("from channel canary");
    expect(evidenceHoldMessage(V2, { require: { clusters: 1 }, signed: undefined })).toContain(
      "carries no signed evidence",
    );
  });

  const input = (o: Partial<ReleaseInput>): ReleaseInput => ({
    chosen: V2,
    via: "follow",
    trust: { vouches: true, acceptExpiredSeconds: 0, reachable: true },
    recalls: [],
    revoked: [],
    revert: undefined,
    now: NOW,
    ...o,
  });
  it.each<[string, ReleaseInput, string]>([
    ["no requirement: take", input({}), "take"],
    [
      "required and enough: take",
      input({
        trust: {
          vouches: true,
          acceptExpiredSeconds: 0,
          reachable: true,
          evidence: { require: { clusters: 3 }, signed: signed() },
        },
      }),
      "take",
    ],
    [
      "required and short: hold EvidenceShort",
      input({
        trust: {
          vouches: true,
          acceptExpiredSeconds: 0,
          reachable: true,
          evidence: { require: { clusters: 4 }, signed: signed() },
        },
      }),
      "EvidenceShort",
    ],
    [
      "a recall wins over the evidence",
      input({
        recalls: [{ version: V2.version }],
        trust: {
          vouches: true,
          acceptExpiredSeconds: 0,
          reachable: true,
          evidence: { require: { clusters: 4 }, signed: undefined },
        },
      }),
      "Recalled",
    ],
    [
      "a revert in force is not held for evidence",
      input({
        revert: {
          from: V2,
          to: V1,
          trigger: "Request",
          reason: "RevertedByRequest",
          message: "m",
          by: "p",
          at: T0,
        },
        trust: {
          vouches: true,
          acceptExpiredSeconds: 0,
          reachable: true,
          evidence: { require: { clusters: 4 }, signed: undefined },
        },
      }),
      "take",
    ],
  ])("decideRelease: %s", (_n, i, want) => {
    const d = decideRelease(i);
    expect(d.kind === "hold" ? d.hold.rule : d.kind).toBe(want);
  });
});

describe("signed evidence as the client reads it (verify/evidence.ts)", () => {
  const good: SignedEvidence = {
    from: "canary",
    version: V2.version,
    digest: V2.digest,
    promotedAt: T0,
    policy: { clusters: 2, machines: 3, failedTrials: 0, soakSeconds: 60 },
    clusters: [
      {
        context: "a",
        server: "https://a",
        cluster: "ca",
        uid: "u1",
        channel: "canary",
        machines: 2,
        failedTrials: 0,
        firstProvenAt: T0,
        lastProvenAt: T0,
        soakSeconds: 600,
        readAt: T0,
      },
      {
        context: "b",
        server: "https://b",
        cluster: "cb",
        uid: "u2",
        channel: "canary",
        machines: 1,
        failedTrials: 0,
        firstProvenAt: T0,
        lastProvenAt: T0,
        soakSeconds: 300,
        readAt: T0,
      },
    ],
  };
  it.each<[string, unknown, boolean]>([
    ["well formed, about this release", good, true],
    ["about another digest", { ...good, digest: V1.digest }, false],
    ["about another version", { ...good, version: V1.version }, false],
    ["no clusters", { ...good, clusters: [] }, false],
    ["a negative count", { ...good, clusters: [{ ...good.clusters[0]!, machines: -1 }] }, false],
    ["not a mapping", "3 clusters", false],
  ])("%s", (_n, raw, ok) => {
    expect(signedEvidenceOf(raw, V2) !== undefined).toBe(ok);
  });
  it("sums clusters and machines, and takes the least soak", () => {
    expect(summaryOf(good)).toEqual({
      from: "canary",
      clusters: 2,
      machines: 3,
      failedTrials: 0,
      soakSeconds: 300,
      promotedAt: T0,
    });
  });
  it("counts a Cluster listed twice once, as its latest read", () => {
    const [a, b] = good.clusters as [ClusterEvidence, ClusterEvidence];
    const later = { ...a, context: "a2", machines: 4, readAt: "2026-11-10T11:00:00Z" };
    const twice = { ...good, clusters: [a, b, later, { ...b, context: "b2" }] };
    expect(summaryOf(twice)).toMatchObject({ clusters: 2, machines: 5 });
    // Without a uid, a Cluster is its server and name.
    const noUid = [a, b].map((c) => ({ ...c, uid: "" }));
    const same = { ...good, clusters: [...noUid, { ...noUid[0]!, context: "again" }] };
    expect(summaryOf(same)).toMatchObject({ clusters: 2, machines: 3 });
  });
});
