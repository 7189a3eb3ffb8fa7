// One torture run: the lab's real control plane, two operator copies and real agents with
// file slots; a rollout to the lab's second release; the seed's faults at their times; then
// the fleet must converge within a deadline, and the history the watcher and the machines'
// records make must pass the invariant checker.
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { START_GRACE_SECONDS } from "../api/types.js";
import type { MachineStep } from "../api/types.js";
import { checkHistory, type Observation } from "../invariants/index.js";
import { LAB_CLUSTER, LAB_DIR, startLab, stopLab, type Lab } from "../lab/lab.js";
import { LAB_RUN_DIR } from "../lab/paths.js";
import { startFleet, type Fleet } from "../lab/processes.js";
import { buildLabRelease } from "../lab/releases.js";
import { FaultInjector, type TortureViolation } from "./faults.js";

export type { TortureViolation } from "./faults.js";
import { machineActs, parseAgentLog } from "./machine-records.js";
import {
  describeFault,
  drawShape,
  followsChannel,
  OPERATOR_COPIES,
  type TortureShape,
} from "./schedule.js";
import { followChannel, SignedChannel } from "./channel.js";
import { recallViolations } from "./recall-rules.js";
import { belowFloor } from "./revert-rules.js";
import { TortureWatcher } from "./watcher.js";
import { Relay } from "./relay.js";

export interface RunOptions {
  seed: number;
  machines: number;
  /** The fault window, from the moment the target is set. */
  durationMs: number;
  log: (line: string) => void;
  /** The signer's certificate lifetime; given, one `cert-lapse` is drawn (args.ts). */
  certSeconds?: number;
}

export interface RunResult {
  shape: TortureShape;
  violations: TortureViolation[];
  /** Machines not on the target at the deadline (empty: converged). */
  unconverged: string[];
  applied: string[];
  /** When the target was set: the faults' times count from here. */
  t0: number;
  ms: number;
}

/**
 * How long the fleet has to converge after the fault window: a turn takes about 20 s on two
 * busy cores (drain, reboot, rejoin, promote: `npm run lab -- --demo`), a Lost machine 40 s
 * to be seen, a paused copy its lease (15 s); doubled for the faults still settling.
 */
export function convergeMs(shape: TortureShape): number {
  return 60_000 + Math.ceil(shape.machines / shape.maxUnavailable) * 40_000;
}

const CONVERGE_POLL_MS = 500;

export async function runTorture(o: RunOptions): Promise<RunResult> {
  const started = Date.now();
  const shape = drawShape(o.seed, o.machines, o.durationMs, {
    certLapse: o.certSeconds !== undefined,
  });
  const lab = await startLab({
    machines: o.machines,
    ...(o.certSeconds === undefined ? {} : { signingDurationSeconds: o.certSeconds }),
  });
  const extra: Observation[] = [];
  let injector: FaultInjector | undefined;
  let watcher: TortureWatcher | undefined;
  let fleet: Fleet | undefined;
  const relays = new Map<string, { relay: Relay; url: string }>();
  try {
    // No person approves in a torture: every machine Auto; the budget drawn from the seed.
    for (const f of lab.fleet)
      await lab.api.machines.patch(f.name, { spec: { rebootPolicy: "Auto" } });
    await lab.api.clusters.patch(LAB_CLUSTER, {
      spec: { disruption: { maxUnavailable: shape.maxUnavailable } },
    });
    // Each agent reaches the API server through its own relay (a network cut of one machine).
    const api = new URL(lab.controlPlane.server);
    for (const f of lab.fleet) {
      const relay = new Relay({ host: api.hostname, port: Number(api.port) });
      relays.set(f.name, { relay, url: await relay.listen() });
    }
    const copiesFrom = Date.now();
    fleet = await startFleet(
      lab,
      () => undefined,
      {},
      { serverOf: (n) => relays.get(n)?.url },
      { channelIntervalSeconds: CHANNEL_INTERVAL_S },
    );
    for (const copy of OPERATOR_COPIES)
      extra.push({ kind: "operator-start", at: copiesFrom, copy });
    const machines = fleet.machines;
    watcher = new TortureWatcher(lab.api, lab.controlPlane.kubeconfig, LAB_CLUSTER, {
      current: (name) => {
        const m = machines.get(name);
        const up = m?.boots.findLast((b) => b.outcome === "up");
        if (!m || !up) return undefined;
        try {
          return { bootId: readFileSync(m.bootIdFile, "utf8").trim(), at: up.at };
        } catch {
          return undefined;
        }
      },
    });
    await watcher.start();
    const w = watcher;
    const stepOf = (name: string): MachineStep | undefined => {
      const h = w.history.findLast((x) => x.kind === "machine" && x.machine.metadata.name === name);
      return h?.kind === "machine" ? h.machine.status?.step : undefined;
    };
    const target = lab.releases[1]!;
    // What a retarget and a bad release set spec.version to, and a recall's fix: all newer
    // than the target. The bad release's revert floor: the lab's first release.
    const floor = lab.releases[0]!.version;
    const releases = {
      next: await buildLabRelease(lab.channelDir, LAB_RUN_DIR, RETARGET_VERSION),
      bad: await buildLabRelease(
        lab.channelDir,
        LAB_RUN_DIR,
        BAD_VERSION,
        "panic",
        undefined,
        floor,
      ),
      fix: await buildLabRelease(lab.channelDir, LAB_RUN_DIR, FIX_VERSION),
    };
    const channel = followsChannel(shape) ? await signChannel(lab) : undefined;
    if (channel === undefined) await pinTarget(lab, target);
    else await followChannel(lab, channel.rootDigest);
    const t0 = Date.now();
    const endFaults = t0 + shape.durationMs;
    const targets = {
      lab,
      releases,
      target,
      fleet,
      relays: new Map([...relays].map(([n, r]) => [n, r.relay])),
      stepOf,
      record: (x: Observation) => extra.push(x),
      log: o.log,
      revertEndMs: convergeMs(shape),
      ...(channel === undefined
        ? {}
        : { channel: { signed: channel.signed, intervalMs: CHANNEL_INTERVAL_S * 1000 } }),
    };
    injector = new FaultInjector(targets);
    await injector.run(shape.faults, t0, endFaults);
    // The target the fleet must end on: a retarget moved it.
    const final = targets.target.version;
    const deadline = Math.max(Date.now(), endFaults) + convergeMs(shape);
    // Every machine counts as not converged until the API server answers (a fault not undone
    // may have left it without etcd): the run then says "not converged", not a crash.
    let unconverged = await pending(lab, final).catch(() => lab.fleet.map((f) => f.name));
    while (unconverged.length > 0 && Date.now() < deadline) {
      await sleep(CONVERGE_POLL_MS);
      unconverged = await pending(lab, final).catch(() => unconverged);
    }
    // The final state, read once more, then the end.
    await finalState(lab)
      .then((o) => extra.push(...o))
      .catch((e: unknown) => o.log(`  the final state could not be read: ${(e as Error).message}`));
    extra.push({ kind: "end", at: Date.now() });
    watcher.stop();
    await stopLab(lab);
    injector.stop();
    const digests = new Map(
      [...lab.releases, releases.next, releases.bad, releases.fix].map((r) => [
        r.version,
        r.digest,
      ]),
    );
    for (const [name, m] of machines) {
      const log = parseAgentLog(readFileSync(m.logFile, "utf8"));
      extra.push(...machineActs(name, m.boots, log, (v) => digests.get(v) ?? `unknown:${v}`));
    }
    const history = [...watcher.history, ...extra].sort((a, b) => a.at - b.at);
    const violations = judge(history, injector, releases.bad.version, floor);
    writeRecord(o.seed, { shape, applied: injector.applied, t0, violations, history });
    return {
      shape,
      violations,
      unconverged,
      applied: injector.applied,
      t0,
      ms: Date.now() - started,
    };
  } finally {
    watcher?.stop();
    if (lab.stoppers.length > 0) await stopLab(lab);
    injector?.stop();
    for (const { relay } of relays.values()) await relay.close();
  }
}

/**
 * The version a retarget sets, the one whose kernel panics on its trial boot, and the fix a
 * publisher ships after a recall (the newest).
 */
export const RETARGET_VERSION = "2026.10.15-001";
export const BAD_VERSION = "2026.10.16-001";
export const FIX_VERSION = "2026.10.17-001";
/**
 * How often each operator copy reads the channel (--channel-interval): a recall's bound is
 * this after it was signed (recall-rules.ts), so short enough for a run of minutes.
 */
export const CHANNEL_INTERVAL_S = 5;

/** A pinned run's target: spec.version and its catalog entry, as a person sets them. */
async function pinTarget(lab: Lab, target: { version: string; digest: string }): Promise<void> {
  const c = await lab.api.clusters.get(LAB_CLUSTER);
  await lab.api.clusters.patch(LAB_CLUSTER, {
    spec: {
      version: target.version,
      releases: {
        catalog: [
          ...(c.spec.releases.catalog ?? []),
          { version: target.version, digest: target.digest },
        ],
      },
    },
  });
}

/**
 * A run that follows a channel: the lab's channel signed, the fleet's release and the target
 * published in it (follow then takes the target, the newest).
 */
async function signChannel(lab: Lab): Promise<{ signed: SignedChannel; rootDigest: string }> {
  const signed = new SignedChannel(lab.channelDir);
  const rootDigest = await signed.init();
  for (const r of lab.releases.slice(0, 2)) await signed.publish(r.version);
  return { signed, rootDigest };
}

/**
 * The fleet stops a bad release: no machine reads Ready on it (its trial panics, so a machine
 * Ready on it would be one the agent promoted on a boot that never came up).
 */
export function badReleaseTaken(history: readonly Observation[], bad: string): TortureViolation[] {
  const seen = new Set<string>();
  const out: TortureViolation[] = [];
  for (const h of history) {
    if (h.kind !== "machine") continue;
    const m = h.machine;
    const name = m.metadata.name;
    if (m.status?.version !== bad || m.status.step !== "Ready" || seen.has(name)) continue;
    seen.add(name);
    out.push({
      rule: "bad-release-taken",
      at: h.at,
      machine: name,
      message: `${name} reads Ready on ${bad}, a release whose kernel panics on its trial boot: the fleet did not stop it`,
    });
  }
  return out;
}

/** Every rule on the run's history: the checker's, and the torture's own. */
function judge(
  history: readonly Observation[],
  injector: FaultInjector,
  bad: string,
  floor: string,
): TortureViolation[] {
  const { recallMarks, badSetAt } = injector;
  return [
    ...checkHistory(history, { startGraceMs: START_GRACE_SECONDS * 1000 }),
    ...badReleaseTaken(history, bad),
    ...injector.broken,
    ...recallMarks.flatMap((m) => recallViolations(history, m, injector.stalls)),
    ...(badSetAt === undefined ? [] : belowFloor(history, floor, badSetAt)),
  ];
}

/** Where each run leaves its schedule, what was applied, and the history it was judged on. */
export const TORTURE_DIR = path.join(LAB_DIR, "torture");

function writeRecord(seed: number, record: object): void {
  mkdirSync(TORTURE_DIR, { recursive: true });
  writeFileSync(path.join(TORTURE_DIR, `seed-${seed}.json`), JSON.stringify(record, null, 1));
}

/** The Cluster and the Machines as read once more at the end. */
async function finalState(lab: Lab): Promise<Observation[]> {
  const cluster = await lab.api.clusters.get(LAB_CLUSTER);
  const { items } = await lab.api.machines.list();
  const at = Date.now();
  return [
    { kind: "cluster", at, cluster },
    ...items.map((machine): Observation => ({ kind: "machine", at, machine })),
  ];
}

/** Machines not yet Ready on the target. */
async function pending(lab: Lab, version: string): Promise<string[]> {
  const { items } = await lab.api.machines.list();
  return lab.fleet
    .filter((f) => {
      const m = items.find((x) => x.metadata.name === f.name);
      return m?.status?.version !== version || m.status.step !== "Ready";
    })
    .map((f) => f.name);
}

/** The lines a violation prints: seed, rule, instant, and the whole fault schedule. */
export function violationReport(r: RunResult, v: TortureViolation): string[] {
  const t0 = r.t0;
  return [
    `torture: VIOLATION seed=${r.shape.seed} rule=${v.rule} at=${new Date(v.at).toISOString()} (+${((v.at - t0) / 1000).toFixed(1)}s)${v.machine ? ` machine=${v.machine}` : ""}: ${v.message}`,
    `  schedule (seed ${r.shape.seed}, ${r.shape.machines} machines, budget ${r.shape.maxUnavailable}):`,
    ...r.shape.faults.map((f) => `    ${describeFault(f)}`),
  ];
}
