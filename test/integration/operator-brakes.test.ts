// The rollout brakes with the real cluster-operator and the real agents (simulated machines:
// the real `liken agent run`, file-backed slots, the firmware model):
//   - a release whose kernel panics is tried by exactly one machine: the Cluster reads
//     ReleaseFailed (condition, STATUS column, Event) while the others keep it staged;
//     `liken rollout resume --failed-release` lets exactly one more try it; a new
//     spec.version clears the brake and the fleet moves on;
//   - outside every maintenance window no turn is granted while every machine downloads and
//     stages the release; once a window is open, turns flow;
//   - a canary of one machine: it alone takes the release, then CanaryPaused until
//     `liken rollout continue`.
import { execFile } from "node:child_process";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WEEKDAYS, type Cluster, type Machine, type ReleaseRef } from "../../src/api/types.js";
import { clusterEventMessages, kubectl, mintClientCert, waitFor } from "../support/kube.js";
import { Fleet } from "./agent-harness.js";
import { runFirstRelease } from "./fleet-steps.js";

const run = promisify(execFile);
const LIKEN = path.resolve(import.meta.dirname, "../../bin/liken.js");
const suffix = Date.now().toString(36);
const NAMES = [`w1-${suffix}`, `w2-${suffix}`, `w3-${suffix}`];

const progressing = (c: Cluster) => c.status?.conditions?.find((x) => x.type === "Progressing");
const trials = (fleet: Fleet, name: string) =>
  fleet.machines.get(name)!.boots.filter((b) => b.trial).length;

describe("rollout brakes with the real operator and agents", () => {
  const fleet = new Fleet();
  let bad: ReleaseRef, v3: ReleaseRef, v4: ReleaseRef, v5: ReleaseRef;
  let alice: string;

  const cluster = () => fleet.api.clusters.get(fleet.cluster);
  const machines = async (): Promise<Machine[]> =>
    Promise.all(NAMES.map((n) => fleet.api.machines.get(n)));
  const liken = async (args: string[]) => {
    try {
      return { code: 0, ...(await run(LIKEN, [...args, "--kubeconfig", alice])) };
    } catch (e) {
      const x = e as { code?: number; stdout?: string; stderr?: string };
      return { code: x.code ?? 1, stdout: x.stdout ?? "", stderr: x.stderr ?? "" };
    }
  };

  beforeAll(async () => {
    alice = mintClientCert({ user: "alice", groups: ["system:masters"] }).kubeconfig;
    await fleet.start([
      "2026.10.10-001",
      "2026.10.13-001",
      "2026.10.14-001",
      "2026.10.15-001",
      "2026.10.16-001",
    ]);
    [, bad, v3, v4, v5] = fleet.releases as [
      ReleaseRef,
      ReleaseRef,
      ReleaseRef,
      ReleaseRef,
      ReleaseRef,
    ];
    for (const name of NAMES) {
      await fleet.addMachine({ name, role: "Worker", rebootPolicy: "Auto" });
    }
    await runFirstRelease(fleet, "every machine runs the first release");
  }, 300_000);
  afterAll(() => fleet.stop(), 60_000);

  it("a bad release is tried by exactly one machine; resume allows one more; a new target clears the brake", async () => {
    // The release's kernel panics wherever it boots: slot b on every machine (they run a).
    for (const name of NAMES) fleet.machines.get(name)!.faults = { b: "panic" };
    await fleet.setTarget(bad);

    const held = await waitFor(
      "ReleaseFailed while the other machines keep the release staged",
      async () => {
        const [c, ms] = await Promise.all([cluster(), machines()]);
        const p = progressing(c);
        const staged = ms.filter(
          (m) => m.status?.step === "UpdatePending" && m.status.staged?.version === bad.version,
        );
        return p?.reason === "ReleaseFailed" && staged.length === 2 ? { c, ms } : undefined;
      },
      { timeoutMs: 300_000, intervalMs: 500 },
    );
    const failed = held.ms.find((m) => m.status?.step === "Failed")!;
    const first = failed.metadata.name;
    expect(NAMES.map((n) => trials(fleet, n)).sort()).toEqual([0, 0, 1]);
    expect(trials(fleet, first)).toBe(1);
    const p = progressing(held.c)!;
    expect(p.status).toBe("False");
    expect(p.message).toContain(`${first} (TrialFellBack`);
    expect(p.message).toContain("set spec.version to another release");
    expect(p.message).toContain(`liken rollout resume ${fleet.cluster} --failed-release`);
    expect(held.c.status?.rebootTurns ?? []).toEqual([]);

    // kubectl shows it: the STATUS column and a Warning Event.
    const table = await kubectl(["get", "cluster", fleet.cluster]);
    expect(table.stdout).toMatch(/\bReleaseFailed\b/);
    const events = await waitFor(
      "the ReleaseFailed Event",
      async () => {
        const r = await clusterEventMessages(fleet.cluster, "ReleaseFailed");
        return r.includes(first) ? r : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 500 },
    );
    expect(events).toContain("maxFailedTrials is 1");
    // liken status says it too.
    const status = await liken(["status", fleet.cluster, "--once"]);
    expect(status.stdout).toContain(`cluster ${fleet.cluster}: ReleaseFailed`);
    expect(status.stdout).toContain("--failed-release");

    // A person allows more trials: exactly one more machine tries it, and the brake holds again.
    const resumed = await liken(["rollout", "resume", fleet.cluster, "--failed-release"]);
    expect(resumed.stderr).toBe("");
    expect(resumed.stdout).toContain(
      `accepted the failed trials of ${bad.version} as alice: ${first}`,
    );
    const again = await waitFor(
      "a second machine failed and the brake holds again",
      async () => {
        const [c, ms] = await Promise.all([cluster(), machines()]);
        const failures = ms.filter((m) => m.status?.step === "Failed").length;
        return progressing(c)?.reason === "ReleaseFailed" && failures === 2 ? c : undefined;
      },
      { timeoutMs: 300_000, intervalMs: 500 },
    );
    expect(NAMES.map((n) => trials(fleet, n)).sort()).toEqual([0, 1, 1]);
    expect(again.spec.rollout?.failedReleaseResume).toMatchObject({
      machines: [first],
      by: "alice",
    });
    expect(progressing(again)?.message).toContain("1 earlier failure(s) were accepted");

    // A new spec.version clears the brake: every machine moves to it.
    for (const name of NAMES) fleet.machines.get(name)!.faults = {};
    await fleet.setTarget(v3);
    await fleet.waitAll(
      "every machine runs the new target",
      (m) => m.status?.step === "Ready" && m.status.version === v3.version,
      400_000,
    );
    const refused = await liken(["rollout", "resume", fleet.cluster, "--failed-release"]);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain(`is not held by failed trials of ${v3.version}`);
  }, 900_000);

  it("outside every maintenance window no turn is granted while the machines stage; an open window lets turns flow", async () => {
    // A window on the day after tomorrow (UTC): closed now, whatever the time of day.
    const day = WEEKDAYS[(new Date().getUTCDay() + 6 + 2) % 7]!;
    await fleet.api.clusters.patch(fleet.cluster, {
      spec: {
        version: v4.version,
        disruption: { windows: [{ days: [day], start: "03:00", duration: "1h", timeZone: "UTC" }] },
      },
    });
    const held = await waitFor(
      "every machine staged the release, held by the window",
      async () => {
        const [c, ms] = await Promise.all([cluster(), machines()]);
        const staged = ms.every(
          (m) => m.status?.step === "UpdatePending" && m.status.staged?.version === v4.version,
        );
        // The operator's message counts the staged machines as of its last pass, which may
        // come a moment after the last Machine's status: wait for it to say all three.
        const p = progressing(c);
        return staged &&
          p?.reason === "OutsideMaintenanceWindow" &&
          p.message.includes("3 machine(s) staged")
          ? c
          : undefined;
      },
      { timeoutMs: 300_000, intervalMs: 500 },
    );
    const p = progressing(held)!;
    expect(p.message).toContain("3 machine(s) staged");
    expect(p.message).toMatch(
      new RegExp(`the next opens ${day} 03:00 UTC \\(\\d{4}-\\d\\d-\\d\\dT03:00:00Z\\) for 1h`),
    );
    expect(held.status?.rebootTurns ?? []).toEqual([]);
    // No machine ever held a turn for v4 while the window was closed.
    const turnsForV4 = fleet.history.filter(
      (h) =>
        h.kind === "Cluster" &&
        (h.object as Cluster).status?.rebootTurns?.some((t) => t.version === v4.version),
    );
    expect(turnsForV4).toEqual([]);
    expect((await kubectl(["get", "cluster", fleet.cluster])).stdout).toMatch(
      /\bOutsideMaintenanceWindow\b/,
    );

    // A window open all week: turns flow.
    const all = [...WEEKDAYS];
    await fleet.api.clusters.patch(fleet.cluster, {
      spec: { disruption: { windows: [{ days: all, start: "00:00", duration: "168h" }] } },
    });
    await waitFor(
      "a turn for the staged release",
      async () =>
        ((await cluster()).status?.rebootTurns ?? []).some((t) => t.version === v4.version),
      { timeoutMs: 60_000, intervalMs: 300 },
    );
  }, 600_000);

  it("a canary of one machine takes the release alone, then the rollout pauses until `liken rollout continue`", async () => {
    await fleet.waitAll(
      "every machine runs the release of the window test",
      (m) => m.status?.step === "Ready" && m.status.version === v4.version,
      400_000,
    );
    await fleet.api.clusters.patch(fleet.cluster, {
      spec: { version: v5.version, rollout: { canary: { machines: 1 } } },
    });
    const paused = await waitFor(
      "CanaryPaused with one machine on the release and two staged",
      async () => {
        const [c, ms] = await Promise.all([cluster(), machines()]);
        const on = ms.filter((m) => m.status?.version === v5.version && m.status.step === "Ready");
        const staged = ms.filter((m) => m.status?.step === "UpdatePending");
        return progressing(c)?.reason === "CanaryPaused" && on.length === 1 && staged.length === 2
          ? { c, canary: on[0]!.metadata.name }
          : undefined;
      },
      { timeoutMs: 300_000, intervalMs: 500 },
    );
    expect(paused.c.status?.canary?.machines).toEqual([paused.canary]);
    expect(progressing(paused.c)?.message).toContain(`liken rollout continue ${fleet.cluster}`);
    expect((await kubectl(["get", "cluster", fleet.cluster])).stdout).toMatch(/\bCanaryPaused\b/);

    const cont = await liken(["rollout", "continue", fleet.cluster]);
    expect(cont.stderr).toBe("");
    expect(cont.stdout).toContain(`continued the rollout of ${v5.version}`);
    expect(cont.stdout).toContain(`canary: ${paused.canary}`);
    await fleet.waitAll(
      "every machine runs the release after the continue",
      (m) => m.status?.step === "Ready" && m.status.version === v5.version,
      400_000,
    );
    const again = await liken(["rollout", "continue", fleet.cluster]);
    expect(again.code).not.toBe(0);
    expect(again.stderr).toContain("already passed");
  }, 900_000);

  it("an unknown time zone is reported in SpecValid", async () => {
    await fleet.api.clusters.patch(fleet.cluster, {
      spec: {
        disruption: {
          windows: [{ days: ["Mon"], start: "03:00", duration: "1h", timeZone: "Mars/Base" }],
        },
      },
    });
    const v = await waitFor(
      "SpecValid False",
      async () => {
        const c = (await cluster()).status?.conditions?.find((x) => x.type === "SpecValid");
        return c?.status === "False" ? c : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 300 },
    );
    expect(v.reason).toBe("UnknownTimeZone");
    expect(v.message).toContain('time zone "Mars/Base"');
  }, 120_000);
});
