// The operator copies of a simulated run: each second a live copy sees the Cluster through its
// watch (fresh, or the one it had), polls the signed channel on its own clock, runs the real
// decide (src/operator/decide/decide.ts) and writes what it decided, conditioned on the
// resourceVersion it read, as operator.ts does; the Lost marks too.
import type { Cluster, Machine } from "../api/index.js";
import { decide as operatorDecide, DEFAULT_SETTINGS } from "../operator/decide/decide.js";
import { trustViewOf } from "../operator/channel/trust.js";
import type { FloorRead } from "../release-decision/decide.js";
import type { Mutant } from "./mutants.js";
import { tufOutcome } from "./channel.js";
import { blindTo, recorded } from "./blind.js";
import {
  at,
  CLUSTER,
  mkey,
  observeCluster,
  observeMachine,
  readCluster,
  readMachine,
  stamp,
  T0,
  V1,
  V2,
  V3,
  type Copy,
  type World,
} from "./world-state.js";

/** Every release's revert floor read, none declared (a floor is revert.ts's table's). */
const FLOORS: ReadonlyMap<string, FloorRead> = new Map(
  [V1, V2, V3].map((r) => [r.digest, { kind: "read" } as FloorRead]),
);

const settings = (w: World, c: Copy) => ({
  ...DEFAULT_SETTINGS,
  identity: c.id,
  startGraceSeconds: w.mutant === "grace" ? 0 : DEFAULT_SETTINGS.startGraceSeconds,
});

/** A copy starts, or wakes from a pause: a fresh view and a fresh start grace. */
export function startCopy(w: World, c: Copy, view: Copy["view"]): void {
  c.alive = true;
  c.paused = false;
  c.startedAt = w.now;
  c.view = view;
  w.history.push({ kind: "operator-start", at: at(w), copy: c.id });
}

/** An approver runs: some operator copy is up (it approves machines' certificates). */
export const approving = (w: World): boolean => w.copies.some((c) => c.alive && !c.paused);

/** A Machine as a copy's list shows it (its resourceVersion set), made once per version. */
function machineView(w: World, name: string, m: { obj: Machine; rv: number }): Machine {
  const known = w.views.get(name);
  if (known?.rv === m.rv) return known.view;
  const listed = { ...m.obj, metadata: { ...m.obj.metadata, resourceVersion: String(m.rv) } };
  const view =
    w.mutant === "leader"
      ? { ...listed, spec: { ...listed.spec, role: "Worker" as const } }
      : listed;
  w.views.set(name, { rv: m.rv, view });
  return view;
}

export function operatorTick(w: World, c: Copy): void {
  if (!c.alive || c.paused) return;
  const { api, mutant, channel, now } = w;
  // A watch delivers an event a moment after the write (here: 30 % of the seconds a copy
  // still decides on the Cluster it had); a dropped watch resumes, or lists again after
  // 410 Gone, 20 % of the seconds. Either way the view becomes the store's.
  const fresh = c.watchDropped ? w.rng.chance(0.2) : w.rng.chance(0.7);
  if (c.view.cluster === undefined || fresh) {
    // A dropped watch resumes (or lists again after 410 Gone): the view is the store's.
    c.watchDropped = false;
    c.view = { cluster: readCluster(w), at: api.version };
  }
  const machines = w.sims.flatMap((s) => {
    const m = readMachine(w, s.name);
    return m === undefined ? [] : [machineView(w, s.name, m)];
  });
  const renewed = new Map<string, number>();
  for (const [n, t] of w.leases) renewed.set(n, t - T0);
  const view = c.view.cluster!;
  const shown = blindTo(mutant, view.obj);
  pollChannel(w, c, shown);
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
    settings(w, c),
  );
  if (d.changed) {
    const status = recorded(mutant, d.status, view.obj, channel);
    const next = stamp(w, { ...view.obj, status });
    const r = api.update(CLUSTER, next, mutant === "unconditioned" ? undefined : view.rv);
    if (r.code === 200) {
      c.channelView = undefined;
      c.view = { cluster: { obj: next, rv: r.rv }, at: r.rv };
      observeCluster(w);
    } else {
      if (r.code === 504) observeCluster(w);
      c.view.cluster = undefined;
    }
  }
  writeLostMarks(w, d.lostMarks);
}

/**
 * The copy's poll of the signed channel (operator.ts every 10-20 s): the real trust verdict
 * (trust.ts) on the simulated TUF read, made on this copy's clock.
 */
function pollChannel(w: World, c: Copy, shown: Cluster): void {
  const { channel, now } = w;
  const follows = w.shape.channel;
  if (channel === undefined || follows === undefined || now < c.nextPoll) return;
  c.nextPoll = now + w.rng.int(10, 20) * 1000;
  const clock = now + c.clockAhead;
  c.channelView = trustViewOf(
    shown,
    () => new Date(clock),
    (pick) => tufOutcome(channel, clock, follows.acceptExpiredSeconds, blindPick(w.mutant, pick)),
  );
}

/** The recall-blind mutant's follow: the releases shown to it without their recalls. */
const blindPick =
  (mutant: Mutant | undefined, pick: Parameters<Parameters<typeof trustViewOf>[2]>[0]) =>
  (releases: Parameters<typeof pick>[0]) =>
    pick(mutant === "recall-blind" ? releases.map(({ recalled: _r, ...rest }) => rest) : releases);

/** Lost (or back) marks, each conditioned on the Machine's resourceVersion it was decided on. */
function writeLostMarks(w: World, marks: ReturnType<typeof operatorDecide>["lostMarks"]): void {
  for (const mark of marks) {
    const cur = readMachine(w, mark.machine);
    if (cur === undefined || mark.step === undefined) continue;
    const next = { ...cur.obj, status: { ...cur.obj.status, step: mark.step } };
    const r = w.api.update(mkey(mark.machine), next, Number(mark.resourceVersion));
    if (r.code === 200 || r.code === 504) observeMachine(w, mark.machine);
    if ((r.code === 200 || r.code === 504) && mark.step === "Lost") w.marked.add(mark.machine);
  }
}
