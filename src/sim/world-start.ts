// The world at second 0 (world.ts runs it from there): the Cluster, pinned to spec.version or
// following the simulated signed channel; every machine up on release V1 in slot a; every
// operator copy started; and what the observer saw of them, in that order, as the history's
// first entries.
import type { Cluster } from "../api/index.js";
import type { Mutant } from "./mutants.js";
import { SimApi } from "./api.js";
import { rngOf } from "./rng.js";
import { channelOf } from "./channel.js";
import { rfc, type Sim } from "./machine.js";
import {
  CLUSTER,
  machineOf,
  mkey,
  T0,
  V1,
  V2,
  V3,
  type Copy,
  type RunShape,
  type World,
} from "./world-state.js";

export function startWorld(seed: number, shape: RunShape, mutant: Mutant | undefined): World {
  const rng = rngOf(seed ^ 0x5eed);
  const w: World = {
    shape,
    mutant,
    rng,
    api: new SimApi(rng, { error: 0.03, lostReply: 0.02 }),
    history: [],
    now: T0,
    channel: shape.channel === undefined ? undefined : channelOf([V1, V2], T0),
    sims: [],
    copies: [],
    leases: new Map(),
    marked: new Set(),
    views: new Map(),
    written: new Map(),
  };
  const cluster = clusterOf(seed, shape, w.now);
  w.api.create(CLUSTER, cluster);
  w.history.push({ kind: "cluster", at: 0, cluster: structuredClone(cluster) });
  for (let i = 0; i < shape.machines; i++) startMachine(w, i);
  for (let i = 0; i < shape.operators; i++) {
    w.copies.push(copyOf(i, w.now));
    w.history.push({ kind: "operator-start", at: 0, copy: `op-${i}` });
  }
  return w;
}

function clusterOf(seed: number, shape: RunShape, now: number): Cluster {
  const follows = shape.channel;
  return {
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
}

/** Machine `i`, up for an hour on V1 in slot a, its Machine created and observed. */
function startMachine(w: World, i: number): void {
  const { shape, now, history } = w;
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
  w.sims.push(s);
  const m = machineOf(s);
  w.api.create(mkey(name), m);
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

function copyOf(i: number, now: number): Copy {
  return {
    id: `op-${i}`,
    alive: true,
    paused: false,
    startedAt: now,
    view: { cluster: undefined, at: 0 },
    watchDropped: false,
    channelView: undefined,
    nextPoll: now,
    clockAhead: 0,
  };
}
