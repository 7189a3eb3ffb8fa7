// What each fault of a schedule (faults.ts) does to the simulated world when its second comes,
// as data: to the operator copy or machine it names, to the signed channel, or as a person's
// edit of the Cluster; and the heal at shape.healAt, when every fault ends and the fleet has
// the rest of the run to converge.
import type { ReleaseRef } from "../api/index.js";
import type { Fault, FaultKind } from "./faults.js";
import { rfc, type Sim } from "./machine.js";
import { publish, recall, remove } from "./channel.js";
import { startCopy } from "./operator-copies.js";
import {
  at,
  CLUSTER,
  machineOf,
  mkey,
  observeCluster,
  observeMachine,
  readCluster,
  stamp,
  V1,
  V3,
  type Copy,
  type World,
} from "./world-state.js";

/** Each fault, as data: its kind and what it does to the copy or machine it names. */
const FAULT_EFFECTS: Record<FaultKind, (w: World, f: Fault, s: Sim, c: Copy) => void> = {
  "pause-operator": (_w, _f, _s, c) => {
    c.paused = true;
  },
  "wake-operator": (w, _f, _s, c) => {
    // A woken copy keeps the view it had when it was paused (a stale one): only its grace
    // and the watch's resume protect what it writes first.
    if (c.paused && c.alive) startCopy(w, c, c.view);
  },
  "kill-operator": (_w, _f, _s, c) => {
    c.alive = false;
  },
  "start-operator": (w, _f, _s, c) => {
    if (c.alive) return;
    // A new process: no channel read in memory, and its first poll at once.
    c.channelView = undefined;
    c.nextPoll = w.now;
    startCopy(w, c, { cluster: undefined, at: 0 });
  },
  "drop-watch": (_w, _f, _s, c) => {
    c.watchDropped = true;
  },
  "kill-agent": (_w, _f, s) => {
    s.agentUp = false;
    s.download = undefined;
  },
  "start-agent": (_w, _f, s) => {
    s.agentUp = true;
  },
  "power-cut": (w, f, s) => {
    if (!s.powered) return;
    s.powered = false;
    s.download = undefined;
    w.history.push({
      kind: "reboot",
      at: at(w),
      machine: s.name,
      bootId: s.bootId,
      cause: "power",
    });
    s.downFor = 5 + (f.target % 60);
  },
  "net-cut": (_w, _f, s) => {
    s.netCut = true;
  },
  "net-heal": (_w, _f, s) => {
    s.netCut = false;
  },
  "clock-jump": (_w, f, s) => {
    s.skew = -((f.target % 20) + 5) * 60_000;
  },
  retarget: (w) => (w.channel === undefined ? setVersion(w, V3) : publish(w.channel, V3, w.now)),
  revert: (w) => (w.channel === undefined ? setVersion(w, V1) : requestRevert(w)),
  // The newest release signed (the one a follower takes), as a publisher recalls or removes
  // a release it just found bad.
  recall: ({ channel, now }) => {
    const r = channel?.releases.filter((x) => x.recalled === undefined).at(-1);
    if (channel !== undefined && r !== undefined) recall(channel, r.version, now);
  },
  "remove-target": ({ channel, now }) => {
    const r = channel?.releases.at(-1);
    if (channel !== undefined && r !== undefined) remove(channel, r.version, now);
  },
  "channel-cut": ({ channel }) => {
    if (channel !== undefined) channel.reachable = false;
  },
  "channel-heal": ({ channel }) => {
    if (channel !== undefined) channel.reachable = true;
  },
  "stop-signing": ({ channel }) => {
    if (channel !== undefined) channel.refreshing = false;
  },
  "resume-signing": ({ channel }) => {
    if (channel !== undefined) channel.refreshing = true;
  },
  "operator-clock-ahead": (_w, f, _s, c) => {
    c.clockAhead = ((f.target % 30) + 1) * 60_000;
  },
  "operator-clock-fixed": (_w, _f, _s, c) => {
    c.clockAhead = 0;
  },
  unrevoke: (w) => unrevoke(w),
  "delete-machine": (w, _f, s) => {
    w.api.delete(mkey(s.name));
    w.history.push({ kind: "machine-deleted", at: at(w), name: s.name });
    w.api.create(mkey(s.name), machineOf(s));
    observeMachine(w, s.name);
  },
  "cert-lapse": (w, _f, s) => {
    if (s.lapsed !== undefined) return;
    s.lapsed = { joinable: false };
    w.history.push({ kind: "identity", at: at(w), machine: s.name, event: "lapsed" });
  },
  "delete-node": (w, _f, s) => {
    s.node = undefined;
    w.history.push({ kind: "node-deleted", at: at(w), name: s.name });
  },
};

export function applyFault(w: World, f: Fault): void {
  FAULT_EFFECTS[f.kind](
    w,
    f,
    w.sims[f.target % w.sims.length]!,
    w.copies[f.target % w.copies.length]!,
  );
}

/** `liken rollout revert CLUSTER`: the request names the release the Cluster chose. */
function requestRevert(w: World): void {
  const cur = readCluster(w).obj;
  const t = cur.status?.trust;
  const from = t?.target ?? t?.taken;
  if (from === undefined) return;
  const revertRequest = { ...from, by: "person", at: rfc(w.now), reason: "simulated" };
  const next = { ...cur, spec: { ...cur.spec, rollout: { ...cur.spec.rollout, revertRequest } } };
  w.api.update(CLUSTER, stamp(w, next), undefined);
  observeCluster(w);
}

/** `liken rollout unrevoke CLUSTER VERSION`: the release reverted from (or revoked last). */
function unrevoke(w: World): void {
  const cur = readCluster(w).obj;
  const r = cur.status?.revert?.from ?? cur.status?.revokedReleases?.at(-1);
  if (r === undefined) return;
  const u = { version: r.version, digest: r.digest, by: "person", at: rfc(w.now) };
  const next = { ...cur, spec: { ...cur.spec, rollout: { ...cur.spec.rollout, unrevoke: u } } };
  w.api.update(CLUSTER, stamp(w, next), undefined);
  observeCluster(w);
}

/** A person's kubectl edit of spec.version (a retarget, or a revert by hand). */
function setVersion(w: World, r: ReleaseRef): void {
  const cur = readCluster(w).obj;
  const next = { ...cur, spec: { ...cur.spec, version: r.version } };
  w.api.update(CLUSTER, stamp(w, next), undefined);
  observeCluster(w);
}

/** Every fault ends: the fleet then has the rest of the run to converge before the end. */
export function heal(w: World): void {
  for (const c of w.copies) {
    if (!c.alive) c.channelView = undefined; // a new process remembers no channel read
    if (!c.alive || c.paused) startCopy(w, c, { cluster: undefined, at: 0 });
    c.watchDropped = false;
  }
  for (const s of w.sims) {
    s.agentUp = true;
    s.netCut = false;
    s.skew = 0;
  }
  for (const c of w.copies) c.clockAhead = 0;
  if (w.channel !== undefined) {
    w.channel.reachable = true;
    w.channel.refreshing = true;
  }
}
