// The one-command revert with the real cluster-operator and the real agents (simulated
// machines: the real `liken agent run`, file-backed slots, the firmware model): the fleet
// promoted R2, `liken rollout revert` takes every machine back to R1, and since every machine's
// other slot still holds R1 the revert is a reboot each, not a download: the channel sends not
// one byte of R1's artifacts. At every Cluster version the harness recorded, the turns held
// stay within the budget (one).
import { execFile } from "node:child_process";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, expect, it } from "vitest";
import type { Cluster, ReleaseRef } from "../../src/api/types.js";
import { kubeconfigPath, waitFor } from "../support/kube.js";
import { Fleet } from "./agent-harness.js";
import { runFirstRelease } from "./fleet-steps.js";

const run = promisify(execFile);
const LIKEN = path.resolve(import.meta.dirname, "../../bin/liken.js");
const suffix = Date.now().toString(36);
const NAMES = [`rv1-${suffix}`, `rv2-${suffix}`, `rv3-${suffix}`];

const fleet = new Fleet();
let r1: ReleaseRef, r2: ReleaseRef;
const cluster = (): Promise<Cluster> => fleet.api.clusters.get(fleet.cluster);
const trials = (name: string) => fleet.machines.get(name)!.boots.filter((b) => b.trial).length;
/** Bytes of `r`'s artifacts the channel sent (release.yaml aside: a slot check reads it). */
const artifactBytes = (r: ReleaseRef) =>
  fleet.channel!.bytesServed(`/${r.version}/kernel`) +
  fleet.channel!.bytesServed(`/${r.version}/rootfs`);

beforeAll(async () => {
  await fleet.start(["2026.12.01-001", "2026.12.02-001"]);
  [r1, r2] = fleet.releases as [ReleaseRef, ReleaseRef];
  for (const name of NAMES) await fleet.addMachine({ name, role: "Worker", rebootPolicy: "Auto" });
  await runFirstRelease(fleet, "every machine runs the first release");
}, 300_000);
afterAll(() => fleet.stop(), 60_000);

const knownGood = (r: ReleaseRef) =>
  waitFor(
    `${r.version} is the last known good`,
    async () => {
      const c = await cluster();
      return c.status?.lastKnownGood?.version === r.version ? c : undefined;
    },
    { timeoutMs: 30_000, intervalMs: 300 },
  );

it("`liken rollout revert` takes the fleet back to the last known good by reboots alone", async () => {
  await knownGood(r1);
  await fleet.setTarget(r2);
  await fleet.waitAll(
    "every machine runs R2",
    (m) => m.status?.version === r2.version && m.status.step === "Ready",
    240_000,
  );
  await waitFor(
    "R2 is the last known good",
    async () =>
      (await cluster()).status?.lastKnownGood?.version === r2.version ? true : undefined,
    { timeoutMs: 30_000, intervalMs: 300 },
  );
  const before = artifactBytes(r1);
  // The counter counts: R2 went to every machine's other slot over the channel.
  expect(artifactBytes(r2)).toBeGreaterThan(0);
  const trialsBefore = NAMES.map(trials);

  const { stdout } = await run(LIKEN, [
    "rollout",
    "revert",
    fleet.cluster,
    "--reason",
    "a NIC driver drops packets under load",
    "--kubeconfig",
    kubeconfigPath(),
  ]);
  expect(stdout).toContain(`revert ${r2.version} to ${r1.version}`);
  await fleet.waitAll(
    "every machine back on R1",
    (m) => m.status?.version === r1.version && m.status.step === "Ready",
    240_000,
  );

  // A reboot each, not a download: the other slot held R1, checked against its digest chain
  // right before the trial was armed.
  expect(artifactBytes(r1) - before).toBe(0);
  expect(NAMES.map(trials)).toEqual(trialsBefore.map((n) => n + 1));
  const c = await cluster();
  expect(c.status?.revokedReleases?.map((r) => r.version)).toEqual([r2.version]);
  expect(c.status?.conditions?.find((x) => x.type === "Reverted")?.reason).toBe(
    "RevertedByRequest",
  );
  // The budget (one turn) held at every Cluster version recorded.
  const widest = Math.max(
    ...fleet.history.filter((h) => h.kind === "Cluster").map((h) => h.turns!.length),
  );
  expect(widest).toBe(1);
}, 600_000);
