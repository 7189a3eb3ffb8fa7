// The state one simulated run shares (world.ts runs it): the run's shape, its releases, the
// simulated API server, the virtual clock, the machines and the operator copies, and the
// history the invariant checker reads. Every part of the world (the agents, the operator copies,
// the faults) reads and writes it through here, so the order of the run's draws and of its
// history stays the one world.ts's loop gives.
import type { Cluster, Machine, MachineStatus, ReleaseRef } from "../api/index.js";
import type { ChannelView } from "../operator/decide/decide.js";
import type { Observation } from "../invariants/index.js";
import type { SimApi } from "./api.js";
import type { Rng } from "./rng.js";
import type { Mutant } from "./mutants.js";
import type { SimChannel } from "./channel.js";
import { rfc, type Sim } from "./machine.js";

export const T0 = Date.parse("2026-12-01T00:00:00Z");
export const V1: ReleaseRef = { version: "2026.11.01-001", digest: `sha256:${"1".repeat(64)}` };
export const V2: ReleaseRef = { version: "2026.11.02-001", digest: `sha256:${"2".repeat(64)}` };
export const V3: ReleaseRef = { version: "2026.11.03-001", digest: `sha256:${"3".repeat(64)}` };
export const CLUSTER = "cluster/lab";
export const mkey = (n: string): string => `machine/${n}`;

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

export interface Copy {
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

/** One run's world, as world-start.ts makes it and every second of world.ts changes it. */
export interface World {
  readonly shape: RunShape;
  readonly mutant: Mutant | undefined;
  /** The run's one generator: every draw of the world, in the order the loop makes them. */
  readonly rng: Rng;
  readonly api: SimApi;
  readonly history: Observation[];
  /** The true clock, ms: T0 plus one step per simulated second. */
  now: number;
  /** The simulated signed channel the Cluster follows (undefined: the pinned world). */
  readonly channel: SimChannel | undefined;
  readonly sims: Sim[];
  readonly copies: Copy[];
  /** Each machine's last heartbeat renewal (its Lease), on the true clock. */
  readonly leases: Map<string, number>;
  /** Machines marked Lost whose first renewal since is not recorded yet. */
  readonly marked: Set<string>;
  /** The operator copies' Machine views, one per resourceVersion (operator-copies.ts). */
  readonly views: Map<string, { rv: number; view: Machine }>;
  /** The status each agent wrote last, and its text (agent.ts writeStatus). */
  readonly written: Map<string, { rv: number; status: MachineStatus; text: string }>;
}

/** Time since the run began, ms (the history's clock). */
export const at = (w: World): number => w.now - T0;

export const readCluster = (w: World): { obj: Cluster; rv: number } => w.api.get<Cluster>(CLUSTER)!;
export const readMachine = (w: World, n: string) => w.api.get<Machine>(mkey(n));

export function observeCluster(w: World): void {
  w.history.push({ kind: "cluster", at: at(w), cluster: readCluster(w).obj });
}
export function observeMachine(w: World, n: string): void {
  const m = readMachine(w, n);
  if (m !== undefined) w.history.push({ kind: "machine", at: at(w), machine: m.obj });
}

/** The API server's stamp on every write (managedFields[].time), on the true clock. */
export function stamp(w: World, c: Cluster): Cluster {
  if (w.channel === undefined) return c;
  return {
    ...c,
    metadata: { ...c.metadata, managedFields: [{ time: rfc(w.now) }] } as Cluster["metadata"],
  };
}

export function machineOf(s: Sim): Machine {
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
