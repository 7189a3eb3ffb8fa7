// Builders for the operator's unit tables: a Cluster and Machines in the shapes the agent
// and the API server produce (see src/api/types.ts and docs/operator.md).
import type {
  Cluster,
  ClusterCondition,
  ClusterStatus,
  Machine,
  MachineStatus,
  MachineSpec,
  RebootTurn,
  TrialRecord,
} from "../../src/api/index.js";
import {
  decide,
  DEFAULT_SETTINGS,
  type DecideSettings,
  type Decision,
  type Observed,
} from "../../src/operator/decide/decide.js";

export const V1 = "2026.10.10-001";
export const V2 = "2026.10.12-001";
export const V3 = "2026.10.14-001";
export const D1 = `sha256:${"1".repeat(64)}`;
export const D2 = `sha256:${"2".repeat(64)}`;
export const D3 = `sha256:${"3".repeat(64)}`;

/** The operator started at T0; NOW is well past its grace unless a case says otherwise. */
export const T0 = new Date("2026-12-02T10:00:00Z");
export const NOW = new Date("2026-12-02T10:05:00Z");
export const iso = (d: Date, plusSeconds = 0): string =>
  new Date(d.getTime() + plusSeconds * 1000).toISOString().replace(/\.\d{3}Z$/, "Z");

/** When the tables' turns were granted: a minute before NOW. */
export const GRANTED = iso(NOW, -60);

export const SETTINGS: DecideSettings = { ...DEFAULT_SETTINGS, identity: "op-a" };

export function cluster(
  opts: {
    version?: string | null;
    maxUnavailable?: number | string;
    turns?: RebootTurn[];
    status?: ClusterStatus;
  } = {},
): Cluster {
  const c: Cluster = {
    apiVersion: "liken.sh/v1alpha1",
    kind: "Cluster",
    metadata: { name: "lab", resourceVersion: "100", generation: 3 },
    spec: {
      releases: {
        source: "http://127.0.0.1:1/",
        catalog: [
          { version: V1, digest: D1 },
          { version: V2, digest: D2 },
          { version: V3, digest: D3 },
        ],
      },
      disruption: { maxUnavailable: opts.maxUnavailable ?? 1 },
    },
    status: { ...opts.status, rebootTurns: opts.turns ?? opts.status?.rebootTurns ?? [] },
  };
  if (opts.version !== null) c.spec.version = opts.version ?? V2;
  return c;
}

/** `c` with the fields of `spec` replaced (a rollout, a disruption, ...). */
export const withSpec = (c: Cluster, spec: Partial<Cluster["spec"]>): Cluster => ({
  ...c,
  spec: { ...c.spec, ...spec },
});

/** The Progressing condition a decision writes, if any. */
export const progressing = (d: Decision): ClusterCondition | undefined =>
  d.status.conditions?.find((c) => c.type === "Progressing");

/** A machine on V1 that staged V2 and asks for a turn (requested at T0 + `askedAfter` s). */
export function asking(
  name: string,
  opts: { spec?: Partial<MachineSpec>; status?: Partial<MachineStatus>; askedAfter?: number } = {},
): Machine {
  return machine(name, {
    spec: { rebootPolicy: "Auto", ...opts.spec },
    status: {
      step: "UpdatePending",
      staged: { version: V2, digest: D2, slot: "b", at: iso(T0, 1) },
      turnRequest: { version: V2, digest: D2, at: iso(T0, 10 + (opts.askedAfter ?? 0)) },
      ...opts.status,
    },
  });
}

export function machine(
  name: string,
  opts: { spec?: Partial<MachineSpec>; status?: Partial<MachineStatus> } = {},
): Machine {
  return {
    apiVersion: "liken.sh/v1alpha1",
    kind: "Machine",
    metadata: { name, resourceVersion: `rv-${name}` },
    spec: { cluster: "lab", nodeName: name, role: "Worker", ...opts.spec },
    status: { version: V1, digest: D1, step: "Ready", ...opts.status },
  };
}

export function turn(machineName: string, opts: Partial<RebootTurn> = {}): RebootTurn {
  return {
    machine: machineName,
    grantedAt: GRANTED,
    grantedBy: "op-b",
    leader: false,
    version: V2,
    digest: D2,
    deadline: iso(NOW, 1700),
    ...opts,
  };
}

/** A machine back on V2 and Ready, as after its turn. */
export function back(name: string): Machine {
  return machine(name, { status: { version: V2, digest: D2, step: "Ready" } });
}

/** A trial of V2 in slot b that fell back, reported 10 s before NOW. */
export function failedTrial(over: Partial<TrialRecord> = {}): TrialRecord {
  return {
    version: V2,
    digest: D2,
    slot: "b",
    result: "Failed",
    at: iso(NOW, -10),
    reason: "TrialFellBack",
    ...over,
  };
}

/**
 * What decide() does with the turn m1 holds (granted at GRANTED) when m1 reads as `m`:
 * "kept", or the release as "reason: message".
 */
export function turnEnding(m: Machine): string {
  const d = decide(
    observed(cluster({ turns: [turn("m1", { grantedAt: GRANTED })] }), [m]),
    SETTINGS,
  );
  const r = d.releases[0];
  return r === undefined ? "kept" : `${r.reason}: ${r.message}`;
}

/** Every machine renewed its heartbeat 5 s ago unless listed in `silentFor` (seconds). */
export function observed(
  c: Cluster,
  machines: Machine[],
  opts: {
    now?: Date;
    startedAt?: Date;
    silentFor?: Record<string, number>;
    unseen?: string[];
    machinesVersion?: string;
  } = {},
): Observed {
  const now = opts.now ?? NOW;
  // The monotonic clock reads as the wall clock here (no step); clock tests move one alone.
  const mono = now.getTime();
  const renewedAt = new Map<string, number>();
  for (const m of machines) {
    const name = m.metadata.name;
    if (opts.unseen?.includes(name)) continue;
    const silent = opts.silentFor?.[name] ?? 5;
    renewedAt.set(name, mono - silent * 1000);
  }
  return {
    cluster: c,
    machines,
    // A Machine view newer than every Cluster of the tables (rv "100"): fresh, unless a case
    // says otherwise.
    machinesVersion: opts.machinesVersion ?? "1000",
    heartbeats: { renewedAt, since: (opts.startedAt ?? T0).getTime() },
    now,
    mono,
    startedAt: opts.startedAt ?? T0,
  };
}
