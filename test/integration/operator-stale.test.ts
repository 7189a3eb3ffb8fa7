// The guarded turn write, end to end (the page: "The record is a write that names the
// Cluster's resourceVersion, so two copies of cluster-operator cannot both give one slot of
// the budget to a machine"). Two real `liken operator` processes on the real API server; one
// is paused between its read and its write (the LIKEN_TEST_HOLD_TURN_WRITE seam, see
// src/operator/run/hold.ts) while the other grants. The two would pick different machines: the
// paused copy read a Cluster where only lead-1 asked; lead-2 then asks with an older request,
// so the live copy puts lead-2 first. Both are leaders, and the budget (2) would allow both:
// only the leader rule, and the record that carries it, keeps them apart.
//
// The paused copy's write must meet a 409, and its fresh decision must grant nothing while
// lead-2 is down. An independent watcher (Fleet) plays both machines and counts, at every
// Cluster version and every instant, the turns recorded and the leaders down. With the write
// unconditioned (last writer wins), the stale write replaces lead-2's record with lead-1's,
// and lead-1 goes down beside lead-2: the watcher sees two leaders down.
import { expect, it } from "vitest";
import { uniqueName, waitFor } from "../support/kube.js";
import {
  api,
  fileCleanups,
  playFleet,
  stagedStatus,
  startOperatorUndone,
  waitForLog,
  writeStatus,
  type MachinePlan,
  type OperatorProcess,
} from "./operator-fleet.js";

const cleanups = fileCleanups("all");
const ARGS = ["--start-grace", "1s", "--lost-after", "20s", "--no-leader-elect"];

function start(id: string, env: NodeJS.ProcessEnv = {}): OperatorProcess {
  return startOperatorUndone(cleanups, id, ARGS, env);
}

/** The operator's JSON log lines (pino) whose msg contains `text`. */
function logLines(op: OperatorProcess, text: string): Record<string, unknown>[] {
  return op
    .log()
    .split("\n")
    .filter((l) => l.startsWith("{"))
    .map((l) => JSON.parse(l) as Record<string, unknown>)
    .filter((l) => String(l.msg).includes(text));
}

it("a copy paused between its read and its write meets a 409, decides again, and never puts a second leader down", async () => {
  const cluster = uniqueName("stale");
  const [lead1, lead2] = [uniqueName("lead-1"), uniqueName("lead-2")];
  const plans: MachinePlan[] = [
    { name: lead1, role: "Leader" },
    { name: lead2, role: "Leader" },
  ];
  // lead-2 stays down on its turn until the test lets it come back.
  let bringBack = (): void => undefined;
  const back = new Promise<void>((r) => (bringBack = r));
  const { fleet } = await playFleet(cleanups, cluster, plans, {
    cluster: { maxUnavailable: 2 },
    beatEveryMs: 1000,
    sim: { downUntil: (m) => (m === lead2 ? back : undefined) },
  });
  cleanups.push(async () => bringBack()); // a failed run must not leave lead-2 down for ever

  // Copy A reads a Cluster where only lead-1 asks, decides its turn, and is held there.
  const a = start("copy-a", { LIKEN_TEST_HOLD_TURN_WRITE: "1" });
  await waitForLog(a, "cluster-operator started", 120_000);
  const asked = Date.now();
  await writeStatus(lead1, stagedStatus());
  await waitForLog(a, "holding this turn write", 60_000);
  expect(logLines(a, "holding this turn write")[0]?.machines).toEqual([lead1]);

  // lead-2 asks with an older request, so every copy that reads now puts it first; copy B
  // starts, grants lead-2, and lead-2 goes down.
  const older = new Date(asked - 60_000).toISOString();
  const s2 = stagedStatus();
  await writeStatus(lead2, { ...s2, turnRequest: { ...s2.turnRequest!, at: older } });
  const b = start("copy-b");
  await waitFor(
    "copy B grants lead-2 and lead-2 goes down",
    async () => {
      const m = await api.machines.get(lead2);
      return fleet.grantsSeen.includes(lead2) && m.status?.step === "Updating";
    },
    { timeoutMs: 120_000 },
  );
  expect(fleet.grantsSeen).toEqual([lead2]);

  // Copy A wakes and sends the write it decided on the Cluster it read before lead-2's turn.
  process.kill(a.child.pid!, "SIGUSR2");
  await waitFor("copy A's stale write to meet the record, or to land", async () => {
    const decided = logLines(a, "decided again on the Cluster as it is now").length > 0;
    return decided || fleet.violations.length > 0 || fleet.grantsSeen.includes(lead1);
  });
  expect(fleet.violations).toEqual([]);
  expect(fleet.grantsSeen).toEqual([lead2]);
  // The 409: A's write named the resourceVersion it read, and nothing was written.
  const conflicts = logLines(a, "409 Conflict");
  expect(conflicts.map((l) => l.grants)).toEqual([[lead1]]);
  // The fresh decision: on the Cluster as it is now, with lead-2's record, lead-1 waits.
  const again = logLines(a, "decided again on the Cluster as it is now")[0]!;
  expect(again.resourceVersion).not.toBe(conflicts[0]!.resourceVersion);
  expect(again.grants).toEqual([]);
  expect(again.blocked).toBe("leader");
  const now = await api.clusters.get(cluster);
  expect(now.status?.rebootTurns?.map((t) => t.machine)).toEqual([lead2]);
  expect(now.status?.rebootTurns?.[0]?.grantedBy).toBe(b.identity);

  // lead-2 comes back; only then does lead-1 get its turn (from either copy).
  bringBack();
  await waitFor("both leaders on the new release", async () => fleet.finished.size === 2, {
    timeoutMs: 60_000,
  });
  await fleet.stop();
  expect(fleet.violations).toEqual([]);
  expect(fleet.maxSeen.leadersActing).toBe(1);
  expect(fleet.grantsSeen).toEqual([lead2, lead1]);
}, 300_000);
