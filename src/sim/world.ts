// One simulated run: a Cluster, 20-200 machines with A/B slots and a bootloader, their agents
// (the real src/agent/steps.ts decide), several operator copies (the real
// src/operator/decide.ts decide), the simulated API server (api.ts), a virtual clock of one
// step per simulated second, and the faults of a schedule (faults.ts). Everything observed
// goes into a history the invariant checker reads (src/invariants).
import type { Cluster, Machine, MachineStatus, ReleaseRef, SlotName } from "../api/index.js";
import { effectiveTarget } from "../target/view.js";
import type { Slot } from "../bootloader/types.js";
import {
  afterSlotCheck,
  beforeDrain,
  decide as agentDecide,
  type Decision as AgentDecision,
  type Observed as AgentObserved,
} from "../agent/steps.js";
import {
  decide as operatorDecide,
  DEFAULT_SETTINGS,
  type ChannelView,
} from "../operator/decide.js";
import { trustViewOf } from "../operator/channel/trust.js";
import type { FloorRead } from "../target/decide.js";
import { planDrain } from "../drain/plan.js";
import type { Observation } from "../invariants/index.js";
import { SimApi } from "./api.js";
import { rngOf } from "./rng.js";
import type { Fault, FaultKind } from "./faults.js";
import type { Mutant } from "./mutants.js";
import { agentObserved, other, rfc, statusAfter, type Sim } from "./machine.js";
import {
  channelOf,
  publish,
  publisherTick,
  recall,
  remove,
  tufOutcome,
  type SimChannel,
} from "./channel.js";
import { blindTo, recorded } from "./blind.js";

const T0 = Date.parse("2026-12-01T00:00:00Z");
export const V1: ReleaseRef = { version: "2026.11.01-001", digest: `sha256:${"1".repeat(64)}` };
export const V2: ReleaseRef = { version: "2026.11.02-001", digest: `sha256:${"2".repeat(64)}` };
export const V3: ReleaseRef = { version: "2026.11.03-001", digest: `sha256:${"3".repeat(64)}` };
const CLUSTER = "cluster/lab";
/** Every release's revert floor read, none declared (a floor is revert.ts's table's). */
const FLOORS: ReadonlyMap<string, FloorRead> = new Map(
  [V1, V2, V3].map((r) => [r.digest, { kind: "read" } as FloorRead]),
);

type Action = AgentDecision["action"];
const TRIAL_ACTIONS = [
  "disarm",
  "promote",
  "fall-back-report",
  "not-taken-report",
  "not-armed-report",
] as const;
type TrialAction = Extract<Action, { kind: (typeof TRIAL_ACTIONS)[number] }>;
const isTrialAction = (a: Action): a is TrialAction =>
  (TRIAL_ACTIONS as readonly string[]).includes(a.kind);
const mkey = (n: string): string => `machine/${n}`;

export interface RunShape {
  machines: number;
  leaders: number;
  operators: number;
  maxUnavailable: number;
  /** Virtual seconds the run lasts. */
  seconds: number;
  /** The second every fault ends (faults are drawn before it). */
  healAt: number;
  /** Releases whose trial boot fails (a bad release) on every machine. */
  badBoot: readonly string[];
  /**
   * The Cluster follows a simulated signed channel (spec.releases.trust, follow) and reverts
   * by itself after `maxFailures` failed trials; undefined: the pinned world (spec.version).
   */
  channel?: { acceptExpiredSeconds: number; maxFailures: number };
}

interface Copy {
  id: string;
  alive: boolean;
  paused: boolean;
  startedAt: number;
  view: { cluster: { obj: Cluster; rv: number } | undefined; at: number };
  watchDropped: boolean;
  /** The last channel read not yet written (operator.ts keeps it until a write takes it). */
  channelView: ChannelView | undefined;
  nextPoll: number;
  /** This copy's wall clock minus the true one (a clock that ran ahead), ms. */
  clockAhead: number;
}

export interface RunResult {
  history: Observation[];
  seconds: number;
}

export function runWorld(
  seed: number,
  shape: RunShape,
  faults: readonly Fault[],
  mutant: Mutant | undefined,
): RunResult {
  const rng = rngOf(seed ^ 0x5eed);
  const api = new SimApi(rng, { error: 0.03, lostReply: 0.02 });
  const history: Observation[] = [];
  let now = T0;
  const at = (): number => now - T0;

  const follows = shape.channel;
  const channel: SimChannel | undefined =
    follows === undefined ? undefined : channelOf([V1, V2], now);
  const cluster: Cluster = {
    apiVersion: "liken.sh/v1alpha1",
    kind: "Cluster",
    metadata: { name: "lab", uid: `uid-${seed}`, resourceVersion: "1", generation: 1 },
    spec:
      follows === undefined
        ? {
            version: V2.version,
            releases: { source: "http://releases.invalid/", catalog: [V1, V2, V3] },
            disruption: { maxUnavailable: shape.maxUnavailable },
          }
        : {
            releases: {
              source: "http://releases.invalid/",
              catalog: [V1, V2, V3],
              trust: {
                mode: "channel",
                channel: "stable",
                rootDigest: `sha256:${"r".repeat(64)}`,
                acceptExpiredSeconds: follows.acceptExpiredSeconds,
                follow: {},
              },
            },
            disruption: { maxUnavailable: shape.maxUnavailable },
            rollout: {
              maxFailedTrials: follows.maxFailures,
              revert: { maxFailures: follows.maxFailures },
            },
          },
    status:
      follows === undefined
        ? { rebootTurns: [] }
        : { rebootTurns: [], lastKnownGood: { ...V1, since: rfc(now - 86_400_000) } },
  };
  api.create(CLUSTER, cluster);
  history.push({ kind: "cluster", at: 0, cluster: structuredClone(cluster) });

  const sims: Sim[] = [];
  for (let i = 0; i < shape.machines; i++) {
    const name = `m${String(i).padStart(3, "0")}`;
    const s: Sim = {
      name,
      leader: i < shape.leaders,
      powered: true,
      agentUp: true,
      netCut: false,
      downFor: 0,
      bootSeq: 1,
      bootId: `${name}-boot-1`,
      bootAt: now - 3_600_000,
      skew: 0,
      running: "a",
      slots: {
        a: { release: V1, bytes: V1.digest, state: "staged" },
        b: { release: undefined, bytes: undefined, state: "empty" },
      },
      boot: { defaultSlot: "a", armed: null, started: null },
      download: undefined,
      memory: { failed: [], armed: undefined, drained: undefined, trialSeenAt: undefined },
      node: { bootId: `${name}-boot-1`, heartbeatAt: now, postsIn: 0 },
      lapsed: undefined,
      status: { version: V1.version, digest: V1.digest, step: "Ready" },
    };
    sims.push(s);
    const m = machineOf(s);
    api.create(mkey(name), m);
    history.push({ kind: "machine", at: 0, machine: m });
    history.push({ kind: "boot", at: 0, machine: name, bootId: s.bootId, slot: "a", trial: false });
    // Slot a was written (and checked) before the run: the observer saw its contents.
    history.push({ kind: "slot-write", at: 0, machine: name, slot: "a", digest: V1.digest });
    history.push({
      kind: "read-back",
      at: 0,
      machine: name,
      slot: "a",
      digest: V1.digest,
      matched: true,
    });
  }
  const leases = new Map<string, number>();
  /** Machines marked Lost whose first renewal since is not recorded yet. */
  const marked = new Set<string>();
  const copies: Copy[] = [];
  for (let i = 0; i < shape.operators; i++) {
    copies.push({
      id: `op-${i}`,
      alive: true,
      paused: false,
      startedAt: now,
      view: { cluster: undefined, at: 0 },
      watchDropped: false,
      channelView: undefined,
      nextPoll: now,
      clockAhead: 0,
    });
    history.push({ kind: "operator-start", at: 0, copy: `op-${i}` });
  }
  const settings = (c: Copy) => ({
    ...DEFAULT_SETTINGS,
    identity: c.id,
    startGraceSeconds: mutant === "grace" ? 0 : DEFAULT_SETTINGS.startGraceSeconds,
  });

  const byTick = new Map<number, Fault[]>();
  for (const f of faults) byTick.set(f.at, [...(byTick.get(f.at) ?? []), f]);

  const readCluster = (): { obj: Cluster; rv: number } => api.get<Cluster>(CLUSTER)!;
  const readMachine = (n: string) => api.get<Machine>(mkey(n));

  function observeCluster(): void {
    history.push({ kind: "cluster", at: at(), cluster: readCluster().obj });
  }
  function observeMachine(n: string): void {
    const m = readMachine(n);
    if (m !== undefined) history.push({ kind: "machine", at: at(), machine: m.obj });
  }

  /** Each fault, as data: its kind and what it does to the copy or machine it names. */
  const FAULT_EFFECTS: Record<FaultKind, (f: Fault, s: Sim, c: Copy) => void> = {
    "pause-operator": (_f, _s, c) => {
      c.paused = true;
    },
    "wake-operator": (_f, _s, c) => {
      // A woken copy keeps the view it had when it was paused (a stale one): only its grace
      // and the watch's resume protect what it writes first.
      if (c.paused && c.alive) startCopy(c, c.view);
    },
    "kill-operator": (_f, _s, c) => {
      c.alive = false;
    },
    "start-operator": (_f, _s, c) => {
      if (c.alive) return;
      // A new process: no channel read in memory, and its first poll at once.
      c.channelView = undefined;
      c.nextPoll = now;
      startCopy(c, { cluster: undefined, at: 0 });
    },
    "drop-watch": (_f, _s, c) => {
      c.watchDropped = true;
    },
    "kill-agent": (_f, s) => {
      s.agentUp = false;
      s.download = undefined;
    },
    "start-agent": (_f, s) => {
      s.agentUp = true;
    },
    "power-cut": (f, s) => {
      if (!s.powered) return;
      s.powered = false;
      s.download = undefined;
      history.push({ kind: "reboot", at: at(), machine: s.name, bootId: s.bootId, cause: "power" });
      s.downFor = 5 + (f.target % 60);
    },
    "net-cut": (_f, s) => {
      s.netCut = true;
    },
    "net-heal": (_f, s) => {
      s.netCut = false;
    },
    "clock-jump": (f, s) => {
      s.skew = -((f.target % 20) + 5) * 60_000;
    },
    retarget: () => (channel === undefined ? setVersion(V3) : publish(channel, V3, now)),
    revert: () => (channel === undefined ? setVersion(V1) : requestRevert()),
    // The newest release signed (the one a follower takes), as a publisher recalls or removes
    // a release it just found bad.
    recall: () => {
      const r = channel?.releases.filter((x) => x.recalled === undefined).at(-1);
      if (channel !== undefined && r !== undefined) recall(channel, r.version, now);
    },
    "remove-target": () => {
      const r = channel?.releases.at(-1);
      if (channel !== undefined && r !== undefined) remove(channel, r.version, now);
    },
    "channel-cut": () => {
      if (channel !== undefined) channel.reachable = false;
    },
    "channel-heal": () => {
      if (channel !== undefined) channel.reachable = true;
    },
    "stop-signing": () => {
      if (channel !== undefined) channel.refreshing = false;
    },
    "resume-signing": () => {
      if (channel !== undefined) channel.refreshing = true;
    },
    "operator-clock-ahead": (f, _s, c) => {
      c.clockAhead = ((f.target % 30) + 1) * 60_000;
    },
    "operator-clock-fixed": (_f, _s, c) => {
      c.clockAhead = 0;
    },
    unrevoke: () => unrevoke(),
    "delete-machine": (_f, s) => {
      api.delete(mkey(s.name));
      history.push({ kind: "machine-deleted", at: at(), name: s.name });
      api.create(mkey(s.name), machineOf(s));
      observeMachine(s.name);
    },
    "cert-lapse": (_f, s) => {
      if (s.lapsed !== undefined) return;
      s.lapsed = { joinable: false };
      history.push({ kind: "identity", at: at(), machine: s.name, event: "lapsed" });
    },
    "delete-node": (_f, s) => {
      s.node = undefined;
      history.push({ kind: "node-deleted", at: at(), name: s.name });
    },
  };

  function applyFault(f: Fault): void {
    FAULT_EFFECTS[f.kind](f, sims[f.target % sims.length]!, copies[f.target % copies.length]!);
  }

  /** A copy starts, or wakes from a pause: a fresh view and a fresh start grace. */
  function startCopy(c: Copy, view: Copy["view"]): void {
    c.alive = true;
    c.paused = false;
    c.startedAt = now;
    c.view = view;
    history.push({ kind: "operator-start", at: at(), copy: c.id });
  }

  /** `liken rollout revert CLUSTER`: the request names the release the Cluster chose. */
  function requestRevert(): void {
    const cur = readCluster().obj;
    const t = cur.status?.trust;
    const from = t?.target ?? t?.taken;
    if (from === undefined) return;
    const revertRequest = { ...from, by: "person", at: rfc(now), reason: "simulated" };
    const next = { ...cur, spec: { ...cur.spec, rollout: { ...cur.spec.rollout, revertRequest } } };
    api.update(CLUSTER, stamp(next), undefined);
    observeCluster();
  }

  /** `liken rollout unrevoke CLUSTER VERSION`: the release reverted from (or revoked last). */
  function unrevoke(): void {
    const cur = readCluster().obj;
    const r = cur.status?.revert?.from ?? cur.status?.revokedReleases?.at(-1);
    if (r === undefined) return;
    const u = { version: r.version, digest: r.digest, by: "person", at: rfc(now) };
    const next = { ...cur, spec: { ...cur.spec, rollout: { ...cur.spec.rollout, unrevoke: u } } };
    api.update(CLUSTER, stamp(next), undefined);
    observeCluster();
  }

  /** The API server's stamp on every write (managedFields[].time), on the true clock. */
  function stamp(c: Cluster): Cluster {
    if (channel === undefined) return c;
    return {
      ...c,
      metadata: { ...c.metadata, managedFields: [{ time: rfc(now) }] } as Cluster["metadata"],
    };
  }

  /** A person's kubectl edit of spec.version (a retarget, or a revert by hand). */
  function setVersion(r: ReleaseRef): void {
    const cur = readCluster().obj;
    const next = { ...cur, spec: { ...cur.spec, version: r.version } };
    api.update(CLUSTER, stamp(next), undefined);
    observeCluster();
  }

  function machineOf(s: Sim): Machine {
    return {
      apiVersion: "liken.sh/v1alpha1",
      kind: "Machine",
      metadata: { name: s.name, resourceVersion: "0" },
      spec: {
        cluster: "lab",
        nodeName: s.name,
        role: s.leader ? "Leader" : "Worker",
        rebootPolicy: "Auto",
      },
      status: structuredClone(s.status),
    };
  }

  // --- the operator copies --------------------------------------------------------------
  /** A Machine as a copy's list shows it (its resourceVersion set), made once per version. */
  const views = new Map<string, { rv: number; view: Machine }>();
  function machineView(name: string, m: { obj: Machine; rv: number }): Machine {
    const known = views.get(name);
    if (known?.rv === m.rv) return known.view;
    const listed = { ...m.obj, metadata: { ...m.obj.metadata, resourceVersion: String(m.rv) } };
    const view =
      mutant === "leader"
        ? { ...listed, spec: { ...listed.spec, role: "Worker" as const } }
        : listed;
    views.set(name, { rv: m.rv, view });
    return view;
  }

  function operatorTick(c: Copy): void {
    if (!c.alive || c.paused) return;
    // A watch delivers an event a moment after the write (here: 30 % of the seconds a copy
    // still decides on the Cluster it had); a dropped watch resumes, or lists again after
    // 410 Gone, 20 % of the seconds. Either way the view becomes the store's.
    const fresh = c.watchDropped ? rng.chance(0.2) : rng.chance(0.7);
    if (c.view.cluster === undefined || fresh) {
      // A dropped watch resumes (or lists again after 410 Gone): the view is the store's.
      c.watchDropped = false;
      c.view = { cluster: readCluster(), at: api.version };
    }
    const machines = sims.flatMap((s) => {
      const m = readMachine(s.name);
      return m === undefined ? [] : [machineView(s.name, m)];
    });
    const renewed = new Map<string, number>();
    for (const [n, t] of leases) renewed.set(n, t - T0);
    const view = c.view.cluster!;
    const shown = blindTo(mutant, view.obj);
    pollChannel(c, shown);
    const d = operatorDecide(
      {
        cluster: {
          ...shown,
          metadata: { ...shown.metadata, resourceVersion: String(view.rv) },
        },
        machines,
        ...(c.channelView === undefined ? {} : { channel: c.channelView }),
        ...(channel === undefined ? {} : { floors: FLOORS }),
        machinesVersion: String(api.version),
        heartbeats: { renewedAt: renewed, since: c.startedAt - T0 },
        now: new Date(now),
        mono: now - T0,
        startedAt: new Date(c.startedAt),
      },
      settings(c),
    );
    if (d.changed) {
      const status = recorded(mutant, d.status, view.obj, channel);
      const next = stamp({ ...view.obj, status });
      const r = api.update(CLUSTER, next, mutant === "unconditioned" ? undefined : view.rv);
      if (r.code === 200) {
        c.channelView = undefined;
        c.view = { cluster: { obj: next, rv: r.rv }, at: r.rv };
        observeCluster();
      } else {
        if (r.code === 504) observeCluster();
        c.view.cluster = undefined;
      }
    }
    writeLostMarks(d.lostMarks);
  }

  /**
   * The copy's poll of the signed channel (operator.ts every 10-20 s): the real trust verdict
   * (trust.ts) on the simulated TUF read, made on this copy's clock.
   */
  function pollChannel(c: Copy, shown: Cluster): void {
    if (channel === undefined || follows === undefined || now < c.nextPoll) return;
    c.nextPoll = now + rng.int(10, 20) * 1000;
    const clock = now + c.clockAhead;
    c.channelView = trustViewOf(
      shown,
      () => new Date(clock),
      (pick) => tufOutcome(channel, clock, follows.acceptExpiredSeconds, blindPick(pick)),
    );
  }

  /** The recall-blind mutant's follow: the releases shown to it without their recalls. */
  const blindPick =
    (pick: Parameters<Parameters<typeof trustViewOf>[2]>[0]) =>
    (releases: Parameters<typeof pick>[0]) =>
      pick(
        mutant === "recall-blind" ? releases.map(({ recalled: _r, ...rest }) => rest) : releases,
      );

  /** Lost (or back) marks, each conditioned on the Machine's resourceVersion it was decided on. */
  function writeLostMarks(marks: ReturnType<typeof operatorDecide>["lostMarks"]): void {
    for (const mark of marks) {
      const cur = readMachine(mark.machine);
      if (cur === undefined || mark.step === undefined) continue;
      const next = { ...cur.obj, status: { ...cur.obj.status, step: mark.step } };
      const r = api.update(mkey(mark.machine), next, Number(mark.resourceVersion));
      if (r.code === 200 || r.code === 504) observeMachine(mark.machine);
      if ((r.code === 200 || r.code === 504) && mark.step === "Lost") marked.add(mark.machine);
    }
  }

  // --- the machines -----------------------------------------------------------------------
  function bootUp(s: Sim): void {
    s.powered = true;
    s.agentUp = true;
    s.bootSeq++;
    s.bootId = `${s.name}-boot-${s.bootSeq}`;
    s.bootAt = now;
    let slot = s.boot.defaultSlot;
    let trial = false;
    if (s.boot.armed !== null) {
      // Boot-once: the armed entry is consumed as it starts (the bootloader's own record).
      slot = s.boot.armed;
      s.boot.started = slot;
      s.boot.armed = null;
      trial = true;
    }
    history.push({ kind: "boot", at: at(), machine: s.name, bootId: s.bootId, slot, trial });
    const rel = s.slots[slot].release;
    if (
      trial &&
      (s.slots[slot].bytes !== rel?.digest || shape.badBoot.includes(rel?.digest ?? ""))
    ) {
      // The trial kernel does not come up: the watchdog resets, the bootloader falls back.
      s.bootSeq++;
      s.bootId = `${s.name}-boot-${s.bootSeq}`;
      slot = s.boot.defaultSlot;
      history.push({
        kind: "boot",
        at: at(),
        machine: s.name,
        bootId: s.bootId,
        slot,
        trial: false,
      });
    }
    s.running = slot;
    if (s.node !== undefined) s.node.postsIn = rng.int(2, 15);
  }

  function kubeletTick(s: Sim): void {
    if (!s.powered) return;
    if (s.node === undefined) s.node = { bootId: "", heartbeatAt: 0, postsIn: rng.int(2, 15) };
    if (s.node.postsIn > 0) {
      s.node.postsIn--;
      return;
    }
    if (s.node.bootId !== s.bootId) {
      s.node.bootId = s.bootId;
      history.push({ kind: "node", at: at(), name: s.name, ready: true, bootId: s.bootId });
      history.push({ kind: "rejoin", at: at(), machine: s.name, bootId: s.bootId });
    }
    s.node.heartbeatAt = now;
  }

  /** A download runs beside the agent's loop: one step of it per second. */
  function downloadTick(s: Sim): void {
    const dl = s.download;
    if (!s.powered || !s.agentUp || dl === undefined || --dl.left > 0) return;
    // A bad copy (a flipped byte on the way): the slot's bytes differ from the release.
    const bytes = rng.chance(0.005) ? "sha256:corrupt" : dl.release.digest;
    s.slots[dl.slot] = { release: dl.release, bytes, state: "staged" };
    history.push({
      kind: "slot-write",
      at: at(),
      machine: s.name,
      slot: dl.slot,
      digest: dl.release.digest,
    });
    s.download = undefined;
  }

  /** An approver runs: some operator copy is up (it approves machines' certificates). */
  const approving = (): boolean => copies.some((c) => c.alive && !c.paused);

  /**
   * A machine whose certificate lapsed: the observer is told whether it could join again
   * now, and its agent joins with the bootstrap credential when it can (never-rejoins: never).
   * True while it is still locked out.
   */
  function identityTick(s: Sim): boolean {
    const l = s.lapsed;
    if (l === undefined) return false;
    const joinable = s.powered && s.agentUp && !s.netCut && approving();
    if (joinable !== l.joinable) {
      l.joinable = joinable;
      history.push({ kind: "join-possible", at: at(), machine: s.name, possible: joinable });
    }
    if (!joinable || mutant === "never-rejoins") return true;
    s.lapsed = undefined;
    history.push({ kind: "identity", at: at(), machine: s.name, event: "rejoined" });
    return false;
  }

  /** Before the agent's turn: its download's step, its identity; whether the API answers it. */
  function linkOf(s: Sim): boolean {
    downloadTick(s);
    // Locked out, the agent's requests all get 401: it reads and writes nothing.
    const lockedOut = identityTick(s);
    return !s.netCut && !lockedOut;
  }

  function agentTick(s: Sim): void {
    const reachable = linkOf(s);
    if (!s.powered || !s.agentUp) return;
    if (reachable) renewed(s);
    const c = blindTo(mutant, readCluster().obj);
    const o = agentLook(s, c, reachable);
    const d = agentDecide(o);
    if (d.action.kind === "drain") {
      // daemon.ts's order for a disruption: the status announcing it first, and the drain only
      // once it is stored (seed 71742: a drain whose status write failed went uncounted).
      s.status = statusAfter(s, d, o, now, [V1, V2, V3]);
      if (reachable && writeStatus(s)) act(s, d.action, c);
      return;
    }
    act(s, d.action, c);
    s.status = statusAfter(s, d, o, now, [V1, V2, V3]);
    if (reachable) writeStatus(s);
  }

  /** A heartbeat renewal; the first after a Lost mark ends Lost, as the operator counts it. */
  function renewed(s: Sim): void {
    leases.set(s.name, now);
    // The checker's settings.leases: the other renewals change nothing the rules read.
    if (marked.delete(s.name)) history.push({ kind: "lease", at: at(), name: s.name });
  }

  /** What the agent's decide() is shown this second (its turn read recorded in the history). */
  function agentLook(s: Sim, c: Cluster, reachable: boolean): AgentObserved {
    const staged = s.slots[other(s.running)].release;
    const mine = (c.status?.rebootTurns ?? []).find((t) => t.machine === s.name);
    if (reachable && mine !== undefined) {
      const release = { version: mine.version, digest: mine.digest ?? "" };
      history.push({ kind: "turn-read", at: at(), machine: s.name, bootId: s.bootId, release });
    }
    const o = agentObserved(s, now, {
      reachable,
      target: reachable ? effectiveTarget(c) : undefined,
      turn: mine !== undefined && staged !== undefined && mine.digest === staged.digest,
      turnTakenBack: reachable
        ? c.status?.takenBackTurns?.find((t) => t.machine === s.name)?.grantedAt
        : undefined,
      mutant,
    });
    if (o.boot.kind === "on-trial" && s.memory.trialSeenAt === undefined) {
      s.memory.trialSeenAt = now - s.bootAt;
      o.trialSeenAt = s.memory.trialSeenAt;
    }
    return o;
  }

  /**
   * The agent writes its status when it changed (its heartbeat is the Lease, above). Compared as
   * text; the stored status's text is known without serializing it again while the stored
   * Machine is the one this agent wrote last (same resourceVersion).
   */
  const written = new Map<string, { rv: number; status: MachineStatus; text: string }>();
  function writeStatus(s: Sim): boolean {
    const cur = readMachine(s.name);
    if (cur === undefined) return false;
    const last = written.get(s.name);
    const mine = last?.rv === cur.rv;
    if (mine && last.status === s.status) return true; // statusAfter's same object: unchanged
    const text = JSON.stringify(s.status);
    if (text === (mine ? last.text : JSON.stringify(cur.obj.status))) return true;
    const r = api.update(mkey(s.name), { ...cur.obj, status: s.status }, undefined);
    if (r.code === 200) written.set(s.name, { rv: r.rv, status: s.status, text });
    if (r.code === 200 || r.code === 504) observeMachine(s.name);
    // A 504 may have landed, but the writer cannot know: not a licence to act on.
    return r.code === 200;
  }

  function act(s: Sim, a: Action, c: Cluster): void {
    if (isTrialAction(a)) return actOnTrial(s, a);
    switch (a.kind) {
      case "wait":
      case "check-health":
      case "install-boot-files":
        return;
      case "withdraw":
        s.slots[a.slot] = { release: undefined, bytes: undefined, state: "empty" };
        return;
      case "cancel-download":
        s.download = undefined;
        return;
      case "download":
        if (s.download === undefined) {
          s.download = { release: a.release, slot: a.slot, left: rng.int(3, 30) };
          s.slots[a.slot] = { release: a.release, bytes: undefined, state: "writing" };
        }
        return;
      case "request-turn":
        return;
      case "drain":
        return drain(s, a.release);
      case "check-and-reboot":
        return checkAndReboot(s, a.slot, a.release, c);
      case "reboot":
        return reboot(s);
      case "release-turn":
        return releaseTurn(s);
      default: {
        const never: never = a;
        throw new Error(`unknown action ${JSON.stringify(never)}`);
      }
    }
  }
  /** act.ts's drain: the turn read again, fresh, then the real planner on an empty node. */
  function drain(s: Sim, release: ReleaseRef): void {
    // act.ts's order: the turn read again, fresh, right before the drain.
    const held = (readCluster().obj.status?.rebootTurns ?? []).some(
      (t) => t.machine === s.name && t.digest === release.digest,
    );
    if (beforeDrain(held ? { kind: "held" } : { kind: "gone" }, false).kind !== "drain") return;
    // The real planner on this node's (empty) pod list: nothing to evict, done at once.
    const plan = planDrain(s.name, { pods: [], claims: [] }, {});
    if (plan.waves.some((w) => w.pods.length > 0)) return;
    history.push({
      kind: "drain-start",
      at: at(),
      machine: s.name,
      bootId: s.bootId,
      release,
    });
    s.memory.drained = release.digest;
  }

  /**
   * The turn given back (uncordoned): back in service only with its Node on this boot, so the
   * checker keeps a machine that gives its turn back before that counted as down.
   */
  function releaseTurn(s: Sim): void {
    s.memory.drained = undefined;
    if (s.node?.bootId === s.bootId) {
      history.push({ kind: "rejoin", at: at(), machine: s.name, bootId: s.bootId });
    }
  }

  /** The actions that end or undo a trial (the bootloader's record and the agent's memory). */
  function actOnTrial(s: Sim, a: TrialAction): void {
    switch (a.kind) {
      case "disarm":
        s.boot.armed = null;
        s.memory.armed = undefined;
        return;
      case "promote":
        history.push({
          kind: "promote",
          at: at(),
          machine: s.name,
          bootId: s.bootId,
          release: s.slots[a.slot].release!,
        });
        s.boot = { defaultSlot: a.slot, armed: null, started: null };
        s.memory.armed = undefined;
        s.memory.drained = undefined;
        s.memory.trialSeenAt = undefined;
        return;
      case "fall-back-report":
      case "not-taken-report": {
        const rel = s.slots[a.slot].release;
        if (rel !== undefined) {
          s.memory.failed = [...new Set([...s.memory.failed, rel.digest])];
          history.push({ kind: "trial-failed", at: at(), machine: s.name, release: rel });
          const lastTrial = {
            ...rel,
            slot: a.slot as SlotName,
            result: "Failed",
            at: rfc(now),
            bootId: s.bootId,
            reason: "FellBack",
          } as never;
          s.status = { ...s.status, lastTrial }; // a new object: the old one may be stored
        }
        // As memory.ts (fellBack, notTaken): the drain is remembered until the turn is given
        // back, which the agent does once this boot rejoined (steps.ts giveBack).
        s.boot.started = null;
        s.memory.armed = undefined;
        s.memory.trialSeenAt = undefined;
        return;
      }
      case "not-armed-report":
        s.boot.armed = null;
        s.boot.started = null;
        s.memory.armed = undefined;
        return;
      default: {
        const never: never = a;
        throw new Error(`unknown action ${JSON.stringify(never)}`);
      }
    }
  }

  /** act.ts's order: read the slot back, read the turn again, then arm, then reboot. */
  function checkAndReboot(s: Sim, slot: Slot, release: ReleaseRef, c: Cluster): void {
    const armIt = (): void => {
      s.memory.armed = { slot, bootId: s.bootId, shown: true };
      s.boot.armed = slot;
      history.push({
        kind: "arm",
        at: at(),
        machine: s.name,
        bootId: s.bootId,
        slot: slot as SlotName,
        release,
      });
    };
    if (mutant === "arm-first") armIt();
    const matched = s.slots[slot].bytes === release.digest;
    history.push({
      kind: "read-back",
      at: at(),
      machine: s.name,
      slot: slot as SlotName,
      digest: release.digest,
      matched,
    });
    const held = (readCluster().obj.status?.rebootTurns ?? c.status?.rebootTurns ?? []).some(
      (t) => t.machine === s.name && t.digest === release.digest,
    );
    const v = afterSlotCheck(
      matched ? { kind: "matched" } : { kind: "mismatch", problems: ["digest differs"] },
      held ? { kind: "held" } : { kind: "gone" },
      false,
      slot,
      release,
    );
    switch (v.kind) {
      case "arm":
        if (mutant !== "arm-first") armIt();
        return reboot(s);
      case "skip-trial":
        s.memory.failed = [...new Set([...s.memory.failed, release.digest])];
        history.push({ kind: "trial-failed", at: at(), machine: s.name, release });
        return reboot(s);
      case "retry":
      case "stand-down":
        return;
      default: {
        const never: never = v;
        throw new Error(`unknown verdict ${JSON.stringify(never)}`);
      }
    }
  }

  function reboot(s: Sim): void {
    history.push({ kind: "reboot", at: at(), machine: s.name, bootId: s.bootId, cause: "agent" });
    s.powered = false;
    s.download = undefined;
    s.downFor = rng.int(10, 40);
  }

  /** After the faults: every machine on the target or failed it, and no turn held. */
  function settled(): boolean {
    const c = readCluster().obj;
    const target = effectiveTarget(c);
    if ((c.status?.rebootTurns ?? []).length > 0) return false;
    return sims.every((s) => {
      const st = readMachine(s.name)?.obj.status;
      return (
        target === undefined ||
        (st?.digest === target.digest && st.step === "Ready") ||
        s.memory.failed.includes(target.digest)
      );
    });
  }

  /** Every fault ends: the fleet then has the rest of the run to converge before the end. */
  function heal(): void {
    for (const c of copies) {
      if (!c.alive) c.channelView = undefined; // a new process remembers no channel read
      if (!c.alive || c.paused) startCopy(c, { cluster: undefined, at: 0 });
      c.watchDropped = false;
    }
    for (const s of sims) {
      s.agentUp = true;
      s.netCut = false;
      s.skew = 0;
    }
    for (const c of copies) c.clockAhead = 0;
    if (channel !== undefined) {
      channel.reachable = true;
      channel.refreshing = true;
    }
  }

  // --- the clock ----------------------------------------------------------------------------
  /** One simulated second; false once the fleet settled after the faults ended. */
  function second(t: number): boolean {
    now = T0 + t * 1000;
    if (channel !== undefined) publisherTick(channel, now);
    for (const f of byTick.get(t) ?? []) applyFault(f);
    if (t === shape.healAt) heal();
    if (t > shape.healAt && t % 10 === 0 && settled()) return false;
    for (const s of sims) {
      if (!s.powered && --s.downFor <= 0) bootUp(s);
    }
    for (const s of sims) kubeletTick(s);
    for (const s of sims) agentTick(s);
    for (const c of copies) operatorTick(c);
    return true;
  }

  for (let t = 0; t < shape.seconds && second(t); t++);
  // The end: every fault healed, the fleet given time to settle, then judged.
  for (const s of sims) observeMachine(s.name);
  observeCluster();
  history.push({ kind: "end", at: at() + 1 });
  return { history, seconds: shape.seconds };
}
