// The machine scenario's steps, each waiting on what the host's API shows and on the guest's
// boots, with deadlines; every check that fails adds a problem to the run.
import { setTimeout as sleep } from "node:timers/promises";
import type { LikenApi } from "../../src/api/client.js";
import type { KubeConfig } from "@kubernetes/client-node";
import type { Guest, GuestBoot } from "./machine-guest.js";
import type { MachineWatch } from "./machine-watch.js";
import {
  placeWorkload,
  spareNode,
  WORKLOAD_LINGER_S,
  WORKLOAD_NAMESPACE,
  WORKLOAD_REPLICAS,
  workloadPlacement,
} from "./machine-workload.js";
import { recordNamespace, type Recorder } from "../support/drain-helpers.js";
import { violations } from "../support/drain-invariants.js";
import { graceVerdict } from "./drain-grace.js";
import { readKillingTimes } from "./kubelet-killing.js";
import { rejoinProof } from "./rejoin-proof.js";
import { draChecks, placeDra, type DraRun } from "./machine-dra.js";
import type { NodeWatch } from "./node-watch.js";
import type { Relay } from "./relay.js";
import { formatBoot, type BootLine } from "./scenarios.js";
import type { MachinePlan } from "./machine-plan.js";

/**
 * Deadlines, for 2 busy cores under TCG: a boot of the guest takes 1-2 min when quiet; the
 * first includes the agent's start and first report; a turn includes the download and write of
 * the slot, the drain, the read-back and the reboot into the trial. The download and write of a
 * 551 MB slot is the guest's longest stretch of work (56 to 219 s alone on the host); with the
 * two bootloaders' guests side by side it shares the cores, and at load average 30 to 40 it
 * was still writing v2 600 s after the target moved (2026-12-05): 900 s.
 */
const FIRST_REPORT_MS = 360_000;
const TURN_GRANTED_MS = 900_000;
const TRIAL_PROVED_MS = 600_000;
const FALLBACK_MS = 900_000;
/** How long the way to the API server stays cut, and how long a Failed machine is watched. */
const CUT_MS = 30_000;
const NO_RETRY_MS = 20_000;
/**
 * The kubelet-down release: its download and turn (as TURN_GRANTED_MS), its trial boot, the
 * agent's prove deadline (GUEST_PROVE_MS, 120 s) and the fallback boot.
 */
const KUBELET_DOWN_MS = 1_200_000;
/** The guest's kubelet registering its Node and reporting Ready, after the agent's first report. */
const NODE_READY_MS = 300_000;

export interface Ctx {
  machine: string;
  cluster: string;
  api: LikenApi;
  kc: KubeConfig;
  watch: MachineWatch;
  guest: Guest;
  relay: Relay;
  say: (l: string) => void;
  problems: string[];
  /** When the scenario started (Date.now()). */
  t0: number;
  /** The guest's real Node, as the host sees it (absent for the lab's kwok Node). */
  node?: NodeWatch;
  /** Every watch event of the workload's pods from their placement on the real Node. */
  pods?: Recorder;
  /** What the real node proved, for the summary line (`drain-grace-ok`). */
  proven: string[];
  /** The cluster's CA (the DRA driver's kubeconfig trusts it; real node only). */
  caPem?: string;
  /** The DRA driver and claim holder placed on the real node. */
  dra?: DraRun;
  /** What this run proves (machine-plan.ts). */
  plan: MachinePlan;
}

/**
 * The guest's kubelet registered its Node and reports it Ready from this boot; when the plan
 * has the drain, the workload is placed on it then (two pods Ready there), the spare Node
 * joins, and (with the DRA order) the DRA driver and its claim holder.
 */
export async function realNodeJoins(c: Ctx, node: NodeWatch): Promise<void> {
  const deadline = Date.now() + NODE_READY_MS;
  while (!(node.last?.ready === "True" && node.last.bootId !== "")) {
    if (Date.now() > deadline) {
      throw new Error(
        `the guest's kubelet did not register Node ${c.machine} Ready within ${NODE_READY_MS / 1000} s (last seen: ${JSON.stringify(node.last)})`,
      );
    }
    await sleep(250);
  }
  c.say(`Node ${c.machine} registered by the guest's kubelet: bootID ${node.last.bootId}, Ready`);
  if (!c.plan.workload) return;
  const t = Date.now();
  await placeWorkload(c.kc, c.machine, spareNode(c.machine));
  c.say(`workload Ready on ${c.machine} in ${((Date.now() - t) / 1000).toFixed(1)} s`);
  c.pods = await recordNamespace(WORKLOAD_NAMESPACE, c.kc);
  if (c.plan.dra && c.caPem !== undefined && c.guest.console !== undefined)
    c.dra = await placeDra(c.kc, c.machine, c.caPem, c.say);
}

/**
 * The drain of the real node, from the watch record of the workload's pods: the budget was
 * never broken (drain-invariants.ts) and the kubelet stopped each evicted pod within its grace,
 * after the workload's linger (drain-grace.ts).
 */
async function drainChecks(c: Ctx, pods: Recorder): Promise<void> {
  pods.stop();
  const killing = await readKillingTimes(c.kc, WORKLOAD_NAMESPACE);
  const budget = { name: "web", labels: { app: "web" }, minHealthy: WORKLOAD_REPLICAS - 1 };
  const broken = violations(pods.log, { node: c.machine, drivers: [], budgets: [budget] });
  const grace = graceVerdict(pods.log, c.machine, WORKLOAD_LINGER_S, WORKLOAD_REPLICAS, killing);
  c.problems.push(...broken, ...grace.problems);
  for (const s of grace.stops)
    c.say(
      `drain: ${s.pod} stopped by the kubelet ${s.stoppedAfterS} s after the kubelet's Killing (grace ${s.graceS} s, exit ${s.exitCode})`,
    );
  if (broken.length === 0 && grace.problems.length === 0) c.proven.push("drain-grace-ok");
  if (c.dra === undefined || c.guest.console === undefined) return;
  const dra = await draChecks(c.kc, c.machine, c.dra, c.guest.console(), c.say);
  c.problems.push(...dra);
  if (dra.length === 0) c.proven.push("dra-unprepare-before-driver");
}

/** The watches of the real node's pods, at the end of a run whatever its outcome. */
export function stopRecorders(c: Ctx): void {
  c.pods?.stop();
  c.dra?.recorder.stop();
}

/** The trial was promoted only once its Node showed the trial boot Ready (rejoin-proof.ts). */
function rejoinChecks(c: Ctx, node: NodeWatch): void {
  const r = rejoinProof(node.sights, c.watch.machine?.status?.lastTrial?.at);
  if (r.ok) c.say(`rejoin: ${r.says}`);
  else c.problems.push(r.problem);
}

export async function firstReport(c: Ctx, v1: string): Promise<void> {
  await c.watch.until(`${c.machine} report ${v1}`, FIRST_REPORT_MS, (x) => {
    const s = x.machine?.status;
    return s?.version === v1 && s.step === "Ready";
  });
  c.say(`${c.machine} reports ${v1}, Ready`);
}

/**
 * The guest loses the API server mid-turn: the relay is cut as soon as the turn is granted
 * (the agent drains, then reads its turn again before arming). While cut, the agent must keep
 * running (it keeps trying to connect) and must not reboot.
 */
async function cutDuringTurn(c: Ctx): Promise<void> {
  const bootsBefore = c.guest.boots.length;
  c.relay.setCut(true);
  const from = Date.now() - c.t0;
  c.say(`fault: the way to the API server is cut for ${CUT_MS / 1000} s`);
  await sleep(CUT_MS);
  for (const m of c.guest.agentSaid(from, Date.now() - c.t0).slice(0, 8))
    c.say(`fault: the agent said: ${m}`);
  const refused = c.relay.refusedWhileCut;
  c.relay.setCut(false);
  const rebooted = c.guest.boots.length !== bootsBefore;
  c.say(
    `fault: restored; while cut the agent tried ${refused} connections and the machine ${rebooted ? "REBOOTED" : "did not reboot"}`,
  );
  if (rebooted) c.problems.push("the machine rebooted while its API server was cut off");
  if (refused === 0)
    c.problems.push("no connection reached the relay while cut: was the agent still running?");
}

export async function rollToGood(c: Ctx, v2: string, cut: boolean): Promise<void> {
  const w = c.watch;
  await c.api.clusters.patch(c.cluster, { spec: { version: v2 } });
  c.say(`target ${v2}`);
  await w.until(`a turn granted to ${c.machine} for ${v2}`, TURN_GRANTED_MS, (x) => x.turnHeld());
  const st = w.machine?.status;
  c.say(`turn granted (step ${st?.step}/${st?.updateStage ?? "-"})`);
  if (cut) await cutDuringTurn(c);
  await w.until(`${c.machine} proving and promoting ${v2}`, TRIAL_PROVED_MS, (x) => {
    const s = x.machine?.status;
    return s?.version === v2 && s.step === "Ready" && s.lastTrial?.result === "Succeeded";
  });
  c.say(`${c.machine} promoted ${v2} (lastTrial ${w.machine?.status?.lastTrial?.reason})`);
  if (c.node !== undefined) rejoinChecks(c, c.node);
  if (c.pods !== undefined) await drainChecks(c, c.pods);
  const placement = await workloadPlacement(c.kc);
  c.say(`workload after the drain: ${JSON.stringify(placement)}`);
  if ((placement[c.machine] ?? 0) !== 0)
    c.problems.push(`pods still on ${c.machine} after its drain: ${JSON.stringify(placement)}`);
}

export async function rollToBad(c: Ctx, v3: string): Promise<void> {
  const w = c.watch;
  await c.api.clusters.patch(c.cluster, { spec: { version: v3 } });
  c.say(`target ${v3}`);
  await w.until(`${c.machine} reporting the fallback from ${v3}`, FALLBACK_MS, (x) => {
    const s = x.machine?.status;
    return s?.step === "Failed" && s.lastTrial?.version === v3;
  });
  const s = w.machine?.status;
  c.say(
    `${c.machine} reads ${s?.version}, step ${s?.step}, lastTrial ${s?.lastTrial?.version} ${s?.lastTrial?.result} ${s?.lastTrial?.reason}`,
  );
  const boots = c.guest.boots.length;
  await sleep(NO_RETRY_MS);
  if (c.guest.boots.length !== boots)
    c.problems.push(`the machine booted again after reporting Failed (it retried ${v3})`);
}

/**
 * The kubelet-down release (v4, real node only): its trial boots and its agent runs, but its
 * kubelet never starts, so the Node keeps the last boot's id; at the prove deadline the agent
 * gives the trial up with NodeNotRejoined, the bootloader boots the old slot, and the Node
 * comes back Ready there with the fallback boot's id.
 */
export async function rollToKubeletDown(c: Ctx, v4: string, node: NodeWatch): Promise<void> {
  const w = c.watch;
  const before = node.last?.bootId ?? "";
  await c.api.clusters.patch(c.cluster, { spec: { version: v4 } });
  c.say(`target ${v4} (its kubelet never starts)`);
  await w.until(`${c.machine} falling back from ${v4}`, KUBELET_DOWN_MS, (x) => {
    const t = x.machine?.status?.lastTrial;
    return x.machine?.status?.step === "Failed" && t?.version === v4;
  });
  const t = w.machine?.status?.lastTrial;
  c.say(`${c.machine}: lastTrial ${t?.version} ${t?.result} ${t?.reason}: ${t?.message}`);
  if (t?.result !== "Failed" || t.reason !== "NodeNotRejoined")
    c.problems.push(
      `the kubelet-down trial reads ${t?.result} ${t?.reason}, not Failed NodeNotRejoined`,
    );
  if (await nodeBack(c, node, before)) c.proven.push(`kubelet-down-fell-back=${v4}`);
}

/** The Node Ready again with a bootID other than `before` (the fallback boot's kubelet). */
async function nodeBack(c: Ctx, node: NodeWatch, before: string): Promise<boolean> {
  const deadline = Date.now() + NODE_READY_MS;
  const back = (): boolean =>
    node.last?.ready === "True" && node.last.bootId !== "" && node.last.bootId !== before;
  while (!back() && Date.now() < deadline) await sleep(250);
  if (!back()) {
    c.problems.push(
      `the Node did not come back Ready on the old slot with a new bootID within ${NODE_READY_MS / 1000} s (last: ${JSON.stringify(node.last)})`,
    );
    return false;
  }
  c.say(`Node ${c.machine} Ready again on the old slot: bootID ${node.last?.bootId}`);
  return true;
}

/** v1, v2, v3 and, on a real node, v4: the versions the scenario rolled to. */
export type Rolled = readonly [string, string, string, string?];

/** The scenario's rollouts in order, from the first report of v1. */
export async function rollAll(
  c: Ctx,
  v1: string,
  next: readonly { version: string }[],
): Promise<Rolled> {
  const [v2, v3, v4] = next.map((r) => r.version) as [string, string, string?];
  await firstReport(c, v1);
  if (c.node !== undefined) await realNodeJoins(c, c.node);
  await rollToGood(c, v2, c.plan.cutApi);
  await rollToBad(c, v3);
  if (v4 === undefined || c.node === undefined || !c.plan.kubeletDown) return [v1, v2, v3];
  await rollToKubeletDown(c, v4, c.node);
  return [v1, v2, v3, v4];
}

const fmt = (ls: BootLine[]): string => ls.map((l, i) => formatBoot(i + 1, l)).join("; ");

/** The operator read the channel at the guest's address, through the host's proxy. */
async function channelChecks(c: Ctx, newest: string): Promise<void> {
  const cs = (await c.api.clusters.get(c.cluster)).status;
  const reach = cs?.conditions?.find((x) => x.type === "ChannelReachable");
  if (reach?.status !== "True")
    c.problems.push(`the Cluster's ChannelReachable is ${JSON.stringify(reach)}, not True`);
  if (cs?.available !== newest)
    c.problems.push(`the Cluster's AVAILABLE is ${cs?.available}, not ${newest}`);
}

/** What the host's Machine and the boots must show at the end. */
export async function finalChecks(
  c: Ctx,
  [v1, v2, v3, v4]: Rolled,
  boots: readonly GuestBoot[],
): Promise<void> {
  const m = (await c.api.machines.get(c.machine)).status ?? {};
  const p = c.problems;
  if (m.version !== v2) p.push(`the Machine reads LIKEN ${m.version}, not ${v2}`);
  if (m.step !== "Failed") p.push(`the Machine's step is ${m.step}, not Failed`);
  const t = m.lastTrial;
  const [last, reason] = v4 === undefined ? [v3, "TrialFellBack"] : [v4, "NodeNotRejoined"];
  if (t?.version !== last || t.reason !== reason)
    p.push(`lastTrial is ${JSON.stringify(t)}, not ${last} ${reason}`);
  for (const v of v4 === undefined ? [v3] : [v3, v4]) {
    if (!(m.failedReleases ?? []).some((f) => f.version === v))
      p.push(`failedReleases does not list ${v}`);
  }
  const expected: BootLine[] = [
    { slot: "a", version: v1, trial: false },
    { slot: "b", version: v2, trial: true },
    { slot: "a", version: v3, trial: true },
    { slot: "b", version: v2, trial: false },
    ...(v4 === undefined
      ? []
      : [
          { slot: "a" as const, version: v4, trial: true },
          { slot: "b" as const, version: v2, trial: false },
        ]),
  ];
  const seen = boots.map((b) => b.line);
  if (fmt(seen) !== fmt(expected)) p.push(`boots were [${fmt(seen)}], expected [${fmt(expected)}]`);
  await channelChecks(c, last);
  if (c.guest.kind === "qemu") initrdChecks(c, boots);
}

/**
 * Every boot ran its own release's initrd: on systemd-boot the kernel and initrd come from the
 * ESP, so the trials' (v2's, v3's) are there only if the agent installed them; on GRUB they
 * come from the slot's /boot. The lab's stand-in has no initrd.
 */
export function initrdChecks(c: Pick<Ctx, "problems" | "say">, boots: readonly GuestBoot[]): void {
  for (const [i, b] of boots.entries()) {
    const n = `boot ${i + 1} (slot ${b.line.slot} ${b.line.version})`;
    if (b.initrd === undefined) c.problems.push(`${n} printed no LIKEN-INITRD line`);
    else if (b.initrd.version !== b.line.version)
      c.problems.push(`${n} ran the initrd of ${b.initrd.version}: ${b.initrd.line}`);
    if (b.line.trial && b.initrd !== undefined) c.say(`${n} console: ${b.initrd.line}`);
  }
}

/** Each boot's firmware-to-READY=1 time, and each release's download and write. */
export function timings(
  w: MachineWatch,
  boots: readonly GuestBoot[],
  versions: string[],
): string[] {
  const out: string[] = [];
  for (const [i, b] of boots.entries()) {
    if (b.readyMs === undefined) continue;
    out.push(
      `boot ${i + 1}: firmware to the agent's READY=1 in ${((b.readyMs - b.atMs) / 1000).toFixed(1)} s`,
    );
  }
  let from = 0;
  for (const v of versions) {
    const i = w.steps.findIndex((s, k) => k >= from && s.step === "Downloading");
    if (i < 0) {
      out.push(`download and write of ${v}: not seen (shorter than the host's 0.5 s poll)`);
      continue;
    }
    const j = w.steps.findIndex((s, k) => k > i && s.step !== "Downloading");
    const end = j < 0 ? undefined : w.steps[j];
    out.push(
      end === undefined
        ? `download and write of ${v}: did not end`
        : `download and write of ${v}: ${((end.ms - w.steps[i]!.ms) / 1000).toFixed(1)} s (then ${end.step})`,
    );
    from = j < 0 ? w.steps.length : j;
  }
  return out;
}
