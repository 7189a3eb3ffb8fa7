// cluster-operator under the faults a fleet meets: a machine that goes silent (Lost), a turn
// that never comes back (RolloutStalled, then `liken rollout resume`), a Manual machine and
// `liken approve-reboot`, a Machine deleted while it holds a turn, and a release channel
// that changes, breaks and disappears. One operator process serves every Cluster here.
import { execFile } from "node:child_process";
import { writeFileSync } from "node:fs";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serveChannel, type ChannelServer } from "../../src/release/serve.js";
import { kubectl, mintClientCert, uniqueName, waitFor } from "../support/kube.js";
import {
  Fleet,
  Heartbeats,
  D2,
  V1,
  V2,
  api,
  createCluster,
  clusterEvents,
  createMachine,
  deleteAll,
  ensureNamespaces,
  fleetOnServer,
  now,
  stagedStatus,
  startOperator,
  tempDir,
  waitForLog,
  writeChannel,
  writeStatus,
  type MachinePlan,
  type OperatorProcess,
  undo,
  type Cleanups,
} from "./operator-fleet.js";

const run = promisify(execFile);
const LIKEN = path.resolve(import.meta.dirname, "../../bin/liken.js");
/** A person: alice, authenticated by a client certificate (the API server names her). */
let alice: string;
const liken = async (args: string[], kubeconfig = alice) => {
  try {
    const r = await run(LIKEN, [...args, "--kubeconfig", kubeconfig]);
    return { code: 0, ...r };
  } catch (e) {
    const x = e as { code?: number; stdout?: string; stderr?: string };
    return { code: x.code ?? 1, stdout: x.stdout ?? "", stderr: x.stderr ?? "" };
  }
};

const cleanups: Cleanups = [];
let op: OperatorProcess;

beforeAll(async () => {
  await ensureNamespaces();
  alice = mintClientCert({ user: "alice", groups: ["system:masters"] }).kubeconfig;
  op = startOperator({
    args: [
      "--start-grace",
      "1s",
      "--lost-after",
      "6s",
      "--turn-deadline",
      "4s",
      "--no-leader-elect",
    ],
  });
  cleanups.push(() => op.stop());
  await waitForLog(op, "cluster-operator started", 90_000);
});
afterAll(async () => {
  await undo(cleanups);
  if (process.env.LIKEN_OPERATOR_LOG) writeFileSync(process.env.LIKEN_OPERATOR_LOG, op.log());
});

function fleetOf(cluster: string, plans: MachinePlan[], maxUnavailable: number | string = 1) {
  return fleetOnServer(cleanups, cluster, plans, { cluster: { maxUnavailable }, beatEveryMs: 400 });
}

const progressing = async (cluster: string) =>
  (await api.clusters.get(cluster)).status?.conditions?.find((c) => c.type === "Progressing");

describe("Lost", () => {
  it("a silent machine reads Lost, counts against the budget, and leaves Lost when its heartbeat returns", async () => {
    const cluster = uniqueName("lost");
    const plans = [{ name: uniqueName("a") }, { name: uniqueName("b") }, { name: uniqueName("c") }];
    const [a, b, c] = plans.map((p) => p.name) as [string, string, string];
    const { beats } = await fleetOf(cluster, plans, 2);
    beats.silent.add(a);
    const lostM = await waitFor(`Machine ${a} Lost`, async () => {
      const m = await api.machines.get(a);
      return m.status?.step === "Lost" ? m : undefined;
    });
    expect(lostM.status?.conditions?.find((x) => x.type === "Alive")).toMatchObject({
      status: "False",
      reason: "NoHeartbeat",
    });
    const kc = await kubectl(["get", "machine", a]);
    expect(kc.stdout).toMatch(/\bLost\b/);
    await waitFor(
      "counts.lost 1",
      async () => (await api.clusters.get(cluster)).status?.counts?.lost === 1,
    );

    // Budget 2 with one Lost: one turn at a time for b and c.
    const fleet = new Fleet(cluster, plans.slice(1), { downMs: [200, 400] });
    await fleet.start();
    cleanups.push(() => fleet.stop());
    await writeStatus(b, stagedStatus());
    await writeStatus(c, stagedStatus());
    await waitFor("b and c on V2", async () => fleet.finished.size === 2, { timeoutMs: 30_000 });
    expect(fleet.maxSeen.turns).toBe(1);
    expect(fleet.violations).toEqual([]);

    beats.silent.delete(a);
    const back = await waitFor(`Machine ${a} back from Lost`, async () => {
      const m = await api.machines.get(a);
      return m.status?.step !== "Lost" ? m : undefined;
    });
    expect(back.status?.step).toBe("Ready");
    expect(back.status?.conditions?.find((x) => x.type === "Alive")?.status).toBe("True");
    const reasons = (await clusterEvents(cluster)).map((e) => e.reason);
    expect(reasons).toContain("MachineLost");
    expect(reasons).toContain("MachineBack");
  });
});

describe("stalls", () => {
  it("a turn that does not come back stalls the rollout until a person resumes it", async () => {
    const cluster = uniqueName("stall");
    const plans = [{ name: uniqueName("x") }, { name: uniqueName("y") }];
    const [x, y] = plans.map((p) => p.name) as [string, string];
    await fleetOf(cluster, plans, 1);
    await writeStatus(x, stagedStatus());
    await waitFor(`a turn for ${x}`, async () =>
      (await api.clusters.get(cluster)).status?.rebootTurns?.some((t) => t.machine === x),
    );
    // x starts draining and gets stuck on a PodDisruptionBudget; y asks meanwhile.
    await writeStatus(x, {
      ...stagedStatus(),
      step: "Updating",
      updateStage: "Draining",
      drainBlocker: {
        pod: "shop/db-0",
        podDisruptionBudget: "shop/db",
        since: now(),
        message: "Cannot evict pod as it would violate the pod's disruption budget",
      },
    });
    await writeStatus(y, stagedStatus());
    const p = await waitFor("Progressing False RolloutStalled", async () => {
      const c = await progressing(cluster);
      return c?.reason === "RolloutStalled" ? c : undefined;
    });
    expect(p.status).toBe("False");
    for (const part of [
      `Machine ${x}`,
      "Updating (Draining)",
      "pod shop/db-0",
      "PodDisruptionBudget shop/db",
      "liken rollout resume",
    ]) {
      expect(p.message).toContain(part);
    }
    expect((await clusterEvents(cluster)).find((e) => e.reason === "RolloutStalled")?.type).toBe(
      "Warning",
    );

    // No further turn while stalled: y keeps waiting across several operator decisions.
    let looks = 0;
    await waitFor(
      "several looks at a stalled cluster",
      async () => {
        const c = await api.clusters.get(cluster);
        expect(c.status?.rebootTurns?.map((t) => t.machine)).toEqual([x]);
        return ++looks >= 8;
      },
      { intervalMs: 250 },
    );

    const status = await liken(["rollout", "status", cluster]);
    expect(status.code).toBe(0);
    expect(status.stdout).toContain(`${x}: ${V2}`);
    expect(status.stdout).toContain("STALLED");
    expect(status.stdout).toContain("shop/db-0");

    const refused = await liken(["rollout", "resume", cluster, y, "--reason", "nothing"]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(`Machine ${y} holds no reboot turn`);

    const resumed = await liken([
      "rollout",
      "resume",
      cluster,
      x,
      "--reason",
      "PDB shop/db relaxed; x rebooted by hand",
    ]);
    expect(resumed.code).toBe(0);
    expect(resumed.stdout).toContain("released the reboot turn");
    const m = await api.machines.get(x);
    expect(m.spec.resume).toMatchObject({
      by: "alice",
      reason: "PDB shop/db relaxed; x rebooted by hand",
    });
    // x still reports Updating (down) and the budget is 1: it must come back before y goes.
    await writeStatus(x, { version: V2, digest: stagedStatus().staged!.digest, step: "Ready" });
    await waitFor(`a turn for ${y}`, async () =>
      (await api.clusters.get(cluster)).status?.rebootTurns?.some((t) => t.machine === y),
    );
    const released = (await clusterEvents(cluster)).find(
      (e) => e.reason === "TurnReleased" && e.message.includes(x),
    );
    expect(released?.message).toContain("Resumed");
    expect(released?.message).toContain("PDB shop/db relaxed");
    expect((await progressing(cluster))?.reason).not.toBe("RolloutStalled");
  });

  it("a Machine deleted while it holds a turn gives the turn back", async () => {
    const cluster = uniqueName("del");
    const plans = [{ name: uniqueName("d") }];
    const [d] = plans.map((p) => p.name) as [string];
    await fleetOf(cluster, plans, 1);
    await writeStatus(d, stagedStatus());
    await waitFor(`a turn for ${d}`, async () =>
      (await api.clusters.get(cluster)).status?.rebootTurns?.some((t) => t.machine === d),
    );
    await api.machines.delete(d);
    await waitFor(
      "no turn",
      async () => (await api.clusters.get(cluster)).status?.rebootTurns?.length === 0,
    );
    expect((await clusterEvents(cluster)).some((e) => e.message.includes("MachineDeleted"))).toBe(
      true,
    );
  });
});

describe("approve-reboot", () => {
  it("a Manual machine waits for a person, then takes its turn", async () => {
    const cluster = uniqueName("man");
    const plans: MachinePlan[] = [{ name: uniqueName("m"), policy: "Manual" }];
    const [m] = plans.map((p) => p.name) as [string];
    await fleetOf(cluster, plans, 1);
    const early = await liken(["approve-reboot", cluster, m]);
    expect(early.code).toBe(1);
    expect(early.stderr).toContain("has staged no release");
    await writeStatus(m, stagedStatus("Manual"));
    const waiting = await waitFor("WaitingForApproval", async () => {
      const c = await progressing(cluster);
      return c?.reason === "WaitingForApproval" ? c : undefined;
    });
    expect(waiting.message).toContain(m);
    const ok = await liken(["approve-reboot", cluster, m]);
    expect(ok.code).toBe(0);
    expect(ok.stdout).toContain(`approved the reboot of Machine ${m} into ${V2}`);
    expect(ok.stdout).toContain("disruption budget");
    const spec = (await api.machines.get(m)).spec;
    expect(spec.approval).toMatchObject({ version: V2, by: "alice" });
    await waitFor(`a turn for ${m}`, async () =>
      (await api.clusters.get(cluster)).status?.rebootTurns?.some((t) => t.machine === m),
    );
  });
});

describe("machine hold", () => {
  it("a held machine gets no turn and is counted apart; unhold lets it take its turn", async () => {
    const cluster = uniqueName("hold");
    const plans: MachinePlan[] = [{ name: uniqueName("h") }, { name: uniqueName("f") }];
    const [h, f] = plans.map((p) => p.name) as [string, string];
    await fleetOf(cluster, plans, 2);
    const missing = await liken(["machine", "hold", uniqueName("nobody")]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain("does not exist: nothing held");
    const held = await liken(["machine", "hold", h, "--reason", "disk under investigation"]);
    expect(held.code).toBe(0);
    expect(held.stdout).toContain(`held Machine ${h}`);
    expect((await api.machines.get(h)).spec.hold).toMatchObject({
      by: "alice",
      reason: "disk under investigation",
    });
    // Both staged and asking (an agent older than the hold would ask): only f gets a turn.
    await writeStatus(h, stagedStatus());
    await writeStatus(f, stagedStatus());
    await waitFor(`a turn for ${f}`, async () =>
      (await api.clusters.get(cluster)).status?.rebootTurns?.some((t) => t.machine === f),
    );
    expect((await api.clusters.get(cluster)).status?.rebootTurns?.map((t) => t.machine)).toEqual([
      f,
    ]);
    // f comes back on V2: the rollout is complete without h, which MACHINES counts apart.
    const back = {
      version: V2,
      digest: D2,
      step: "Ready" as const,
      target: { version: V2, digest: D2 },
    };
    await writeStatus(f, back);
    const done = await waitFor("RolloutComplete without the held machine", async () => {
      const c = await api.clusters.get(cluster);
      const p = c.status?.conditions?.find((x) => x.type === "Progressing");
      return p?.reason === "RolloutComplete" ? c : undefined;
    });
    expect(done.status?.machines).toBe("1/1, 1 held");
    expect(done.status?.rebootTurns).toEqual([]);
    expect(done.status?.conditions?.find((x) => x.type === "Progressing")?.message).toContain(
      `but those held at their release by a person (liken machine unhold releases them): ${h}`,
    );
    const wide = await kubectl(["get", "machine", h, "-o", "wide"]);
    expect(wide.stdout).toContain("HELD-BY");
    expect(wide.stdout).toContain("alice");

    const released = await liken(["machine", "unhold", h]);
    expect(released.code).toBe(0);
    expect(released.stdout).toContain(`released Machine ${h} (held by alice`);
    expect((await api.machines.get(h)).spec.hold).toBeUndefined();
    await waitFor(`a turn for ${h} once released`, async () =>
      (await api.clusters.get(cluster)).status?.rebootTurns?.some((t) => t.machine === h),
    );
    const again = await liken(["machine", "unhold", h]);
    expect(again.stdout).toContain("is not held: nothing to release");
  });
});

describe("the channel", () => {
  let server: ChannelServer | undefined;
  afterAll(async () => server?.close());

  it("AVAILABLE follows the channel; the annotation asks for a read; a broken channel sets a condition and never stops a rollout", async () => {
    const dir = tempDir("liken-channel-");
    writeChannel(dir, [V1, V2]);
    server = await serveChannel(dir);
    const cluster = uniqueName("chan");
    const plans = [{ name: uniqueName("k") }];
    const [k] = plans.map((p) => p.name) as [string];
    cleanups.push(() => deleteAll(cluster, [k]));
    await createCluster(cluster, { source: `${server.url}/` });
    await createMachine(cluster, plans[0]!);
    const beats = new Heartbeats(cluster, [k], 400);
    await beats.start();
    cleanups.push(async () => beats.stop());
    const avail = async (v: string) =>
      waitFor(
        `AVAILABLE ${v}`,
        async () => (await api.clusters.get(cluster)).status?.available === v,
      );
    await avail(V2);
    const annotate = (v: string) =>
      kubectl(["annotate", "cluster", cluster, "--overwrite", `liken.sh/check-releases=${v}`]);

    writeChannel(dir, [V1, V2, "2026.10.14-001"]);
    await annotate(now());
    await avail("2026.10.14-001");
    const wide = await kubectl(["get", "cluster", cluster]);
    expect(wide.stdout).toContain("2026.10.14-001");

    writeFileSync(path.join(dir, "channel.yaml"), "kind: Channel\nversions: [[[\n");
    await annotate(`${now()}-2`);
    const channelReachable = (reason: string) =>
      waitFor(reason, async () => {
        const c = (await api.clusters.get(cluster)).status?.conditions?.find(
          (x) => x.type === "ChannelReachable",
        );
        return c?.reason === reason ? c : undefined;
      });
    const bad = await channelReachable("ChannelMalformed");
    expect(bad.status).toBe("False");
    expect(bad.message).toContain("channel.yaml");
    expect((await api.clusters.get(cluster)).status?.available).toBe("2026.10.14-001");
    // A rollout goes on whatever the channel says.
    const fleet = new Fleet(cluster, plans, { downMs: [100, 200] });
    await fleet.start();
    cleanups.push(() => fleet.stop());
    await writeStatus(k, stagedStatus());
    await waitFor(`${k} on V2`, async () => fleet.finished.size === 1, { timeoutMs: 30_000 });

    await server.close();
    server = undefined;
    await annotate(`${now()}-3`);
    const gone = await channelReachable("ChannelUnreachable");
    expect(gone.message).toContain("cannot read");
  });
});
