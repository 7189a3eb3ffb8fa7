// bench:decide's figure without a control plane: the CPU one decide() takes over 5,000 Machines
// (`npx tsx bench/decide.ts`), in two states of a rollout: the budget full (500 turns held; most
// passes of a large rollout) and a wave's start (500 turns to grant). CPU time of this process
// (process.cpuUsage) per call, median and p99 of 100 calls after 20 to warm up: a figure that
// a loaded machine moves far less than the wall time bench:operator's decide p99 reads.
// Goal (issue 43): decide p99 under 50 ms at 5,000 Machines.
import { decide } from "../src/operator/decide/decide.js";
import type { Cluster, Machine } from "../src/api/index.js";
const N = 5000,
  V1 = "2026.10.10-001",
  V2 = "2026.10.12-001";
const D1 = `sha256:${"1".repeat(64)}`,
  D2 = `sha256:${"2".repeat(64)}`;
const at = new Date(Date.now() - 60_000).toISOString();
const now = new Date();
const machines: Machine[] = Array.from(
  { length: N },
  (_, i) =>
    ({
      apiVersion: "liken.sh/v1alpha1",
      kind: "Machine",
      metadata: {
        name: `m-${String(i).padStart(4, "0")}`,
        resourceVersion: String(100 + i),
        labels: { "liken.sh/cluster": "bench" },
      },
      spec: {
        cluster: "bench",
        nodeName: `m-${i}`,
        role: i < 3 ? "Leader" : "Worker",
        rebootPolicy: "Auto",
      },
      status: {
        version: V1,
        digest: D1,
        step: "UpdatePending",
        staged: { version: V2, digest: D2, slot: "b", at },
        turnRequest: { version: V2, digest: D2, at },
      },
    }) as Machine,
);
const cluster = (turns: number): Cluster =>
  ({
    apiVersion: "liken.sh/v1alpha1",
    kind: "Cluster",
    metadata: { name: "bench", resourceVersion: "99999", generation: 1 },
    spec: {
      version: V2,
      releases: {
        source: "http://127.0.0.1:9/",
        catalog: [
          { version: V1, digest: D1 },
          { version: V2, digest: D2 },
        ],
      },
      disruption: { maxUnavailable: "10%" },
    },
    status: {
      rebootTurns: machines.slice(1000, 1000 + turns).map((m) => ({
        machine: m.metadata.name,
        grantedAt: at,
        grantedBy: "op",
        leader: false,
        version: V2,
        digest: D2,
        deadline: new Date(Date.now() + 3.6e6).toISOString(),
        priorTrialAt: "",
      })),
    },
  }) as unknown as Cluster;
// a proved release (some machines on V2) so the first-trial brake does not hold
for (const m of machines.slice(0, 1000)) m.status = { version: V2, digest: D2, step: "Ready" };
const renewedAt = new Map(machines.map((m) => [m.metadata.name, performance.now()]));
const obs = (turns: number) => ({
  cluster: cluster(turns),
  machines,
  machinesVersion: "100000",
  heartbeats: { renewedAt, since: 0 },
  now,
  mono: performance.now(),
  startedAt: new Date(0),
});
const settings = {
  identity: "op",
  startGraceSeconds: 1,
  lostAfterSeconds: 40,
  turnDeadlineSeconds: 1800,
};
for (const [label, turns] of [
  ["budget full (500 turns held)", 500],
  ["a wave's start (0 held, 500 to grant)", 0],
] as const) {
  const o = obs(turns);
  for (let i = 0; i < 20; i++) decide(o, settings);
  const cpu: number[] = [];
  for (let i = 0; i < 100; i++) {
    const c0 = process.cpuUsage();
    const d = decide(o, settings);
    const c = process.cpuUsage(c0);
    cpu.push((c.user + c.system) / 1000);
    if (i === 0) console.log(`  grants ${d.grants.length} blocked ${d.blocked?.kind}`);
  }
  cpu.sort((a, b) => a - b);
  console.log(
    `${label}: decide CPU median ${cpu[50]!.toFixed(1)} ms, p99 ${cpu[98]!.toFixed(1)} ms`,
  );
}
