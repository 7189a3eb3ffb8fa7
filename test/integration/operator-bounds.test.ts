// The Cluster status at the CRD's limits, with the real cluster-operator on the real API
// server:
//   - a budget of 100% over machines whose names are as long as Kubernetes allows (253): every
//     turn is recorded, and TURNS (maxLength 4096) names what fits and how many more, instead
//     of a write the server refuses whole (and then no turn recorded, ever);
//   - a status write the server refuses (422 Invalid; here a ValidatingAdmissionPolicy plays a
//     CRD tighter than this liken's, as an older installed CRD would be) is an Event and the
//     condition StatusWriteRefused, the operator backs off instead of writing every second, and
//     once the server accepts again the turn is recorded and the condition goes.
import { execFile } from "node:child_process";
import { writeFileSync } from "node:fs";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CLUSTER_STATUS_BOUNDS, maxLengthOf } from "../../src/api/bounds.js";
import type { Cluster } from "../../src/api/types.js";
import {
  clusterEventMessages,
  kubeconfigPath,
  kubectl,
  uniqueName,
  waitFor,
} from "../support/kube.js";
import {
  api,
  createCluster,
  createMachine,
  deleteAll,
  ensureNamespaces,
  Heartbeats,
  startOperator,
  stagedStatus,
  waitForLog,
  writeStatus,
  type OperatorProcess,
} from "./operator-fleet.js";
import { applyRefusingPolicy } from "../support/refusing-policy.js";

const suffix = Date.now().toString(36);
const TURNS_MAX = maxLengthOf(CLUSTER_STATUS_BOUNDS, "turns");

/** A Machine name of exactly 253 characters (a DNS subdomain: labels of at most 63). */
function longName(i: number): string {
  const base = `w${String(i).padStart(2, "0")}-${suffix}`;
  const labels = [base];
  while (labels.join(".").length < 253) {
    const room = 253 - labels.join(".").length - 1;
    labels.push("x".repeat(Math.min(62, room)));
  }
  return labels.join(".");
}

const refusedCondition = (c: Cluster) =>
  c.status?.conditions?.find((x) => x.type === "StatusWriteRefused");

const cleanups: (() => Promise<unknown>)[] = [];
let op: OperatorProcess;

beforeAll(async () => {
  await ensureNamespaces();
  op = startOperator({ args: ["--start-grace", "1s", "--no-leader-elect"] });
  cleanups.push(() => op.stop());
  await waitForLog(op, "cluster-operator started", 90_000);
}, 120_000);
afterAll(async () => {
  for (const c of cleanups.reverse()) await c();
  if (process.env.LIKEN_OPERATOR_LOG) writeFileSync(process.env.LIKEN_OPERATOR_LOG, op.log());
}, 120_000);

async function newCluster(cluster: string, names: string[]): Promise<void> {
  cleanups.push(() => deleteAll(cluster, names));
  // The failure brake off: this is about the budget alone (no first-trial pacing).
  await createCluster(cluster, { maxUnavailable: "100%", rollout: { maxFailedTrials: 0 } });
}

async function stagedFleet(cluster: string, names: string[]): Promise<void> {
  for (const n of names) {
    await createMachine(cluster, { name: n });
    await writeStatus(n, stagedStatus());
  }
  const hb = new Heartbeats(cluster, names);
  await hb.start();
  cleanups.push(async () => hb.stop());
}

describe("Cluster status at the CRD's limits", () => {
  it("100% of a fleet with 253-character names: every turn recorded, TURNS within its bound", async () => {
    const cluster = uniqueName("wide");
    const names = Array.from({ length: 20 }, (_, i) => longName(i));
    expect(names.every((n) => n.length === 253)).toBe(true);
    await newCluster(cluster, names);
    await stagedFleet(cluster, names);

    const c = await waitFor(
      "all 20 turns recorded on the Cluster",
      async () => {
        const c = await api.clusters.get(cluster);
        return c.status?.rebootTurns?.length === names.length ? c : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 300 },
    );
    // 16 names of 253 and their commas fit in 4096 with the tail; the other 4 are counted.
    expect(c.status!.turns!.length).toBeLessThanOrEqual(TURNS_MAX);
    expect(c.status!.turns).toMatch(/,… and 4 more$/);
    expect(c.status!.turns!.startsWith(names.slice().sort()[0]!)).toBe(true);
    expect(refusedCondition(c)).toBeUndefined();
    expect(op.log()).not.toContain("refused the status write");
    // Their heartbeats exist too: a label value holds 63 characters, so the Lease of a
    // 253-character name carries no machine label (readers take the Lease's name).
    const lease = await kubectl([
      "get",
      "lease",
      "-n",
      "liken-heartbeats",
      names[0]!,
      "-o",
      "json",
    ]);
    expect(lease.code, lease.stderr).toBe(0);
    const labels = (JSON.parse(lease.stdout) as { metadata: { labels?: Record<string, string> } })
      .metadata.labels;
    expect(labels).toEqual({ "liken.sh/cluster": cluster });
  });

  it("a refused status write is an Event and a condition, backs off, and recovers", async () => {
    const cluster = uniqueName("refused");
    const name = `r1-${suffix}`;
    await newCluster(cluster, [name]);
    const policy = `liken-test-refuse-${suffix}`;
    // The server refuses any status of this Cluster that records a turn, as a CRD with
    // rebootTurns maxItems 0 would: 422 Invalid, with the policy's message.
    const removePolicy = await applyRefusingPolicy({
      name: policy,
      apiGroup: "liken.sh",
      resources: ["clusters/status"],
      operations: ["UPDATE"],
      match: `object.metadata.name == '${cluster}'`,
      allow: "!has(object.status.rebootTurns) || size(object.status.rebootTurns) == 0",
      message: "status.rebootTurns: Too many: must have at most 0 items (test policy)",
      reason: "Invalid",
    });
    cleanups.push(removePolicy);
    // A policy holds once the API server has loaded it: a dry-run write of a turn says when.
    await waitFor(
      "the API server enforces the test policy",
      async () => {
        const c = await api.clusters.get(cluster);
        const turn = {
          machine: name,
          grantedAt: new Date().toISOString().replace(/\.\d+Z$/, "Z"),
          grantedBy: "test",
          leader: false,
          version: "2026.10.12-001",
        };
        return api.clusters
          .replaceStatus({ ...c, status: { ...c.status, rebootTurns: [turn] } }, { dryRun: true })
          .then(
            () => false,
            (e: unknown) => (e as { httpStatus?: number }).httpStatus === 422,
          );
      },
      { timeoutMs: 30_000, intervalMs: 300 },
    );
    await stagedFleet(cluster, [name]);

    const refused = await waitFor(
      "the Cluster carries StatusWriteRefused",
      async () => refusedCondition(await api.clusters.get(cluster)),
      { timeoutMs: 60_000, intervalMs: 300 },
    );
    expect(refused).toMatchObject({ status: "True", reason: "StatusInvalid" });
    expect(refused.message).toContain(`status write of Cluster ${cluster} (422 Invalid)`);
    expect(refused.message).toContain("must have at most 0 items (test policy)");
    expect(refused.message).toContain("kubectl get crd clusters.liken.sh -o yaml");
    expect((await api.clusters.get(cluster)).status?.rebootTurns ?? []).toEqual([]);
    await waitFor(
      "a StatusWriteRefused Event on the Cluster",
      async () =>
        (await clusterEventMessages(cluster, "StatusWriteRefused")).includes("422 Invalid"),
      { timeoutMs: 30_000, intervalMs: 500 },
    );

    // Backs off: the second attempt comes after the first wait (10 s), where a retry every
    // second would have come within one. The times are the operator's own log lines'.
    const refusals = (): number[] =>
      op
        .log()
        .split("\n")
        .filter((l) => l.startsWith("{") && l.endsWith("}"))
        .filter((l) => l.includes(`status write of Cluster ${cluster} (422`))
        .map((l) => Date.parse((JSON.parse(l) as { time: string }).time));
    const [first, second] = await waitFor(
      "the operator writes again after its backoff",
      async () => (refusals().length >= 2 ? refusals() : undefined),
      { timeoutMs: 40_000, intervalMs: 500 },
    );
    expect(second! - first!).toBeGreaterThanOrEqual(9_000);

    await removePolicy();
    const c = await waitFor(
      "the turn recorded once the server accepts the status",
      async () => {
        const c = await api.clusters.get(cluster);
        return c.status?.rebootTurns?.length === 1 ? c : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 300 },
    );
    expect(c.status?.rebootTurns?.[0]?.machine).toBe(name);
    expect(refusedCondition(c)).toBeUndefined();
  });

  it("maxLength counts characters, not bytes: bounds.ts's '…' costs one", async () => {
    const cluster = uniqueName("runes");
    await newCluster(cluster, []);
    // Read right before each dry run: the operator writes this Cluster's status meanwhile, and a
    // write naming an older resourceVersion is refused 409 before the schema is looked at. A
    // conflict is therefore read again and tried again; only the schema's answer counts.
    const write = async (turns: string): Promise<string> => {
      for (let attempt = 1; ; attempt++) {
        const c = await api.clusters.get(cluster);
        const answer = await api.clusters
          .replaceStatus({ ...c, status: { ...c.status, turns } }, { dryRun: true })
          .then(
            () => "accepted",
            (e: unknown) => `refused ${(e as { httpStatus?: number }).httpStatus}`,
          );
        if (answer !== "refused 409" || attempt === 10) return answer;
      }
    };
    // 4096 characters of 3 bytes each in UTF-8.
    expect(await write("…".repeat(TURNS_MAX))).toBe("accepted");
    expect(await write("…".repeat(TURNS_MAX + 1))).toBe("refused 422");
  });

  it("`liken rollout resume` refuses a --reason the Machine's spec cannot hold, writing nothing", async () => {
    const liken = path.resolve(import.meta.dirname, "../../bin/liken.js");
    const args = ["rollout", "resume", "no-such-cluster", "no-such-machine"];
    const r = await promisify(execFile)(liken, [
      ...args,
      "--reason",
      "r".repeat(1025),
      "--kubeconfig",
      kubeconfigPath(),
    ]).then(
      () => ({ code: 0, stderr: "" }),
      (e: { code?: number; stderr?: string }) => ({ code: e.code ?? 1, stderr: e.stderr ?? "" }),
    );
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain(
      "--reason has 1025 characters; Machine spec.resume.reason holds at most 1024",
    );
    expect(r.stderr).toContain("LIKEN_OPERATOR_USAGE");
  });
});
