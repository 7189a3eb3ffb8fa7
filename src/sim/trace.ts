// One machine's history, as lines a person reads (`npm run simulate -- --seed S --trace m006`):
// its acts, its Machine status as read (step, version, lastTrial), and the Cluster's turn
// list whenever it changes. For reading a violation's replay, not for any rule.
import type { Observation } from "../invariants/index.js";

type Of<K extends Observation["kind"]> = Extract<Observation, { kind: K }>;

/** Each kind's line, or undefined for the kinds a machine's trace leaves out. */
const LINES: { [K in Observation["kind"]]: ((o: Of<K>) => string) | undefined } = {
  machine: (o) => {
    const s = o.machine.status ?? {};
    const trial = s.lastTrial ? ` lastTrial ${s.lastTrial.version} ${s.lastTrial.result}` : "";
    return `status step ${s.step ?? "-"} on ${s.version ?? "-"}${trial}`;
  },
  node: (o) => `node Ready (bootID ${o.bootId})`,
  "machine-deleted": () => "Machine deleted",
  "node-deleted": () => "Node deleted",
  "turn-read": (o) => `turn-read ${o.release.version} (boot ${o.bootId})`,
  "drain-start": (o) => `drain-start ${o.release.version} (boot ${o.bootId})`,
  arm: (o) => `arm slot ${o.slot} for ${o.release.version} (boot ${o.bootId})`,
  promote: (o) => `promote ${o.release.version} (boot ${o.bootId})`,
  "trial-failed": (o) => `trial-failed ${o.release.version}`,
  "slot-write": (o) => `slot-write slot ${o.slot}`,
  "read-back": (o) => `read-back slot ${o.slot}${o.matched ? "" : " (mismatch)"}`,
  reboot: (o) => `reboot (${o.cause}, from ${o.bootId})`,
  boot: (o) => `boot ${o.bootId} slot ${o.slot}${o.trial ? " (trial)" : ""}`,
  rejoin: (o) => `rejoin (boot ${o.bootId})`,
  identity: (o) => `certificate ${o.event}`,
  "join-possible": (o) => `a bootstrap join ${o.possible ? "possible" : "not possible"}`,
  cluster: undefined,
  lease: undefined,
  "operator-start": undefined,
  "say-so": undefined,
  end: undefined,
};

/** The machine an observation is about (undefined: the fleet's, or none). */
function subject(o: Observation): string | undefined {
  if ("machine" in o) return typeof o.machine === "string" ? o.machine : o.machine.metadata.name;
  return "name" in o ? o.name : undefined;
}

export function traceOf(history: readonly Observation[], machine: string): string[] {
  const out: string[] = [];
  const stamp = (at: number): string => `${(at / 1000).toFixed(0).padStart(5)} s  `;
  let turns = "";
  let last = "";
  for (const o of history) {
    if (o.kind === "cluster") {
      const now = (o.cluster.status?.rebootTurns ?? []).map((t) => t.machine).join(",");
      if (now !== turns) out.push(`${stamp(o.at)}turns [${now}]`);
      turns = now;
      continue;
    }
    const line = LINES[o.kind] as ((x: Observation) => string) | undefined;
    if (line === undefined || subject(o) !== machine) continue;
    const text = line(o);
    if (text === last) continue; // the same status read again says nothing new
    last = text;
    out.push(stamp(o.at) + text);
  }
  return out;
}
