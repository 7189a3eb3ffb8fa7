// bench:operator's agent simulator: every simulated machine of bench/operator.ts in one child
// process of its own, so the agents' work (333 Lease writes a second at 5,000 machines, the
// Updating and Ready writes of each turn) has its own event loop and does not delay the
// measuring process's timestamps. It still shares the machine's cores with the operator, the
// API server and etcd (the bench's header says what that leaves in the figures).
//
// As a real agent does, it writes over one kept-alive connection pool (the lean client,
// src/api/rest.ts) from the object it last wrote: a Lease renewal is one PUT, a status write one
// PUT (a GET only after a 409), with at most WRITE_CONCURRENCY status writes in flight.
//
// Talks to its parent over the IPC channel (fork):
//   parent ──► {t:"beat", periodMs}  heartbeats at this period (null: none)
//              {t:"act"}             watch the Cluster and act on each turn
//   child  ──► {t:"ready"}           listed the Machines and Leases, heartbeats may start
//              {t:"freed", at, slots} a Ready write is about to go out: `slots` turns may be granted
//              {t:"back", at, writeMs} the Ready write was answered after writeMs (API server)
//              {t:"stats", ...}      at exit (SIGTERM): beats sent and skipped, write latencies
import { parseArgs } from "node:util";
import { loadRestConfig, Rest } from "../src/api/rest.js";
import { RestResource } from "../src/api/rest-resource.js";
import {
  HEARTBEAT_NAMESPACE,
  ResourceWatcher,
  type Cluster,
  type Machine,
  type MachineStatus,
} from "../src/api/index.js";

const { values: args } = parseArgs({
  options: {
    kubeconfig: { type: "string" },
    machines: { type: "string" },
    cluster: { type: "string" },
    "per-machine-ms": { type: "string" },
    budget: { type: "string" },
    v2: { type: "string" },
    d2: { type: "string" },
  },
  strict: true,
});
const N = Number(args.machines);
const BUDGET_N = Number(args.budget);
const PER_MACHINE_MS = Number(args["per-machine-ms"]);
const CLUSTER = args.cluster ?? "bench";
const V2 = args.v2 ?? "";
const D2 = args.d2 ?? "";
/** The simulated agents' status writes in flight at once. */
const WRITE_CONCURRENCY = 32;

interface BenchLease {
  apiVersion: string;
  kind: string;
  metadata: { name: string; resourceVersion?: string; labels?: Record<string, string> };
  spec: { holderIdentity: string; leaseDurationSeconds: number; renewTime: string };
}
type ToParent =
  | { t: "ready" }
  | { t: "freed"; at: number; slots: number }
  | { t: "back"; at: number; writeMs: number }
  | { t: "stats"; stats: Record<string, number> };
const send = (m: ToParent): void => void process.send?.(m);
if (process.send === undefined) throw new Error("bench agents: run by bench/operator.ts (fork)");

/** A MicroTime: the API server parses exactly six fractional digits. */
const microTime = (ms: number): string => new Date(ms).toISOString().replace(/Z$/, "000Z");

/** Runs at most `n` of the functions given to it at once, the others in order after. */
function limiter(n: number): <T>(fn: () => Promise<T>) => Promise<T> {
  let active = 0;
  const waiting: (() => void)[] = [];
  return async (fn) => {
    if (active >= n) await new Promise<void>((r) => waiting.push(r));
    else active++;
    try {
      return await fn();
    } finally {
      const next = waiting.shift();
      if (next !== undefined) next();
      else active--;
    }
  };
}

function p99(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil(0.99 * s.length) - 1)] ?? 0;
}

const rest = new Rest(loadRestConfig(args.kubeconfig), "liken-bench-agents");
const machineApi = new RestResource<Machine>(
  rest,
  "Machine",
  "/apis/liken.sh/v1alpha1/machines",
  "bench",
);
const clusterApi = new RestResource<Cluster>(
  rest,
  "Cluster",
  "/apis/liken.sh/v1alpha1/clusters",
  "bench",
);
const leaseApi = new RestResource<BenchLease>(
  rest,
  "Lease",
  `/apis/coordination.k8s.io/v1/namespaces/${HEARTBEAT_NAMESPACE}/leases`,
  "bench",
);

// What each agent last wrote (or read): its next write starts from it, as a real agent's does.
const machineOf = new Map<string, Machine>();
const leaseOf = new Map<string, BenchLease>();
for (const m of (await machineApi.list()).items) machineOf.set(m.metadata.name, m);
for (const l of (await leaseApi.list()).items) leaseOf.set(l.metadata.name, l);
const names = [...leaseOf.keys()].sort();
if (names.length !== N) throw new Error(`bench agents: ${names.length} Leases, expected ${N}`);

// Heartbeats: every Lease renewed once a period, spread evenly over it. A machine whose last
// beat is still on its way skips one (a queue of beats behind a slow API server would make the
// whole fleet Lost).
let periodMs: number | null = null;
const beatsInFlight = new Set<string>();
const beatMs: number[] = [];
let beatsSent = 0;
let beatsSkipped = 0;
let beatsFailed = 0;
const renew = async (m: string): Promise<void> => {
  if (beatsInFlight.has(m)) {
    beatsSkipped++;
    return;
  }
  beatsInFlight.add(m);
  const t0 = performance.now();
  try {
    const base = leaseOf.get(m) ?? (await leaseApi.get(m));
    const body = { ...base, spec: { ...base.spec, renewTime: microTime(Date.now()) } };
    leaseOf.set(m, await leaseApi.replace(body));
    beatsSent++;
    if (beatMs.length < 200_000) beatMs.push(performance.now() - t0);
  } catch {
    beatsFailed++;
    leaseOf.delete(m); // a missed beat; the next one reads the Lease again
  } finally {
    beatsInFlight.delete(m);
  }
};
let next = 0;
const beatTimer = setInterval(() => {
  if (periodMs === null) return;
  const per = Math.ceil(N / (periodMs / 100));
  for (let k = 0; k < per; k++) void renew(names[next++ % N]!);
}, 100);

// Turns: each machine acts on its turn for PER_MACHINE_MS and comes back Ready.
const acting = new Set<string>();
const done = new Set<string>();
const writeLimit = limiter(WRITE_CONCURRENCY);
const writeMs: number[] = [];
let pending = 0; // freed slots announced but not yet matched by the parent (for the cap below)
const writeStatus = async (m: string, status: MachineStatus): Promise<number> => {
  const t0 = performance.now();
  for (let attempt = 1; ; attempt++) {
    try {
      const written = await machineApi.updateStatus(
        m,
        (cur: Machine) => ({ ...cur, status: { ...cur.status, ...status } }),
        machineOf.get(m),
      );
      if (written !== undefined) machineOf.set(m, written);
      const ms = performance.now() - t0;
      writeMs.push(ms);
      return ms;
    } catch (e) {
      // The API server under a wave's load may drop a connection: try again, as an agent does.
      machineOf.delete(m);
      if (attempt >= 5) throw e;
      await new Promise((r) => setTimeout(r, 200 * attempt));
    }
  }
};
const onTurn = (machine: string): void => {
  void (async () => {
    // The machine's time starts when it sees its turn; the Updating report is part of that
    // time, as a real agent's drain and reboot are.
    const back = new Promise((r) => setTimeout(r, PER_MACHINE_MS));
    await writeLimit(() => writeStatus(machine, { step: "Updating", updateStage: "Rebooting" }));
    await back;
    await writeLimit(async () => {
      // The slot is free from the moment the Ready write is sent (after this process's own
      // queue of writes, which 500 separate machines would not have): announced before the
      // write, or the operator's next turn could reach the parent first.
      const at = Date.now();
      acting.delete(machine);
      done.add(machine);
      // The first machine back on V2 proves the release, which also frees the budget's other
      // slots that the failure brake held back until then. None after the last wave.
      const want = done.size === 1 ? BUDGET_N : 1;
      const slots = Math.max(0, Math.min(want, N - done.size - acting.size - pending));
      pending += slots;
      send({ t: "freed", at, slots });
      const ms = await writeStatus(machine, {
        version: V2,
        digest: D2,
        step: "Ready",
        updateStage: undefined,
        staged: undefined,
        turnRequest: undefined,
      } as MachineStatus);
      send({ t: "back", at: Date.now(), writeMs: ms });
    });
  })();
};
const watcher = new ResourceWatcher<Cluster>(clusterApi, {
  onChange: (ev) => {
    if (ev.object.metadata.name !== CLUSTER) return;
    for (const t of ev.object.status?.rebootTurns ?? []) {
      if (acting.has(t.machine) || done.has(t.machine)) continue;
      acting.add(t.machine);
      if (pending > 0) pending--;
      onTurn(t.machine);
    }
  },
});

process.on("message", (m: { t: string; periodMs?: number | null }) => {
  if (m.t === "beat") periodMs = m.periodMs ?? null;
  else if (m.t === "act") void watcher.start();
});
process.on("SIGTERM", () => {
  clearInterval(beatTimer);
  watcher.stop();
  const cpu = process.cpuUsage();
  const stats: ToParent = {
    t: "stats",
    stats: {
      beatsSent,
      beatsSkipped,
      beatsFailed,
      beatP99Ms: Math.round(p99(beatMs)),
      statusWrites: writeMs.length,
      statusWriteP99Ms: Math.round(p99(writeMs)),
      cpuMs: Math.round((cpu.user + cpu.system) / 1000),
    },
  };
  // Exit once the stats are sent: the kept-alive connections would hold the process open.
  process.send?.(stats, () => process.exit(0));
});
send({ t: "ready" });
