// `npm run lab -- --revert [threshold|command]`: the fleet-wide revert (docs/revert.md), scripted
// as the demo is. A release that boots, proves and is promoted on every machine, and whose
// service gate fails an hour later on the lab's clock (health-gate.ts), is taken back:
//   - threshold: spec.rollout.revert {maxFailures: 2} is set with the target; the lab moves its
//     clock an hour on; the agents' post-promotion health fails and cluster-operator reverts by
//     itself, naming the gate;
//   - command: `liken rollout revert lab` (the real CLI) once the release was promoted.
// An independent observer (observer.ts) counts turns in flight, unavailable machines and leaders
// down during the revert; the channel counts the bytes it served of the release gone back to.
// Then the revoked release is targeted again and the refusal printed.
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { sameRelease, type Cluster } from "../api/types.js";
import { likenEntry } from "../cli/entry.js";
import { LikenError } from "../errors.js";
import { until, watchRollout } from "./demo.js";
import { BAD_AFTER_SECONDS, LAB_SERVICE_GATE, moveLabClock } from "./health-gate.js";
import { LAB_CLUSTER, type Lab } from "./lab.js";
import { RolloutObserver } from "./observer.js";
import { LAB_RUN_DIR } from "./paths.js";
import { buildLabRelease, type LabRelease } from "./releases.js";

const run = promisify(execFile);

export const REVERT_HOWS = ["threshold", "command"] as const;
export type RevertHow = (typeof REVERT_HOWS)[number];

/** The release that goes bad after promotion (newer than the lab's LAB_VERSIONS). */
export const LAB_BAD_VERSION = "2026.10.14-001";
/**
 * Forward rollout, an hour on the lab's clock (the agents check again every 60 s), the
 * revert: each a 5-machine rollout, well under 4 minutes on 2 busy cores.
 */
const REVERT_DEADLINE_MS = 10 * 60_000;
/** spec.rollout.revert's limit in the threshold scenario: two machines failing is a pattern. */
const LAB_MAX_FAILURES = 2;

/** The scenario's figures, for the summary line and the e2e test. */
export interface RevertFigures {
  how: RevertHow;
  from: string;
  to: string;
  reason: string;
  gate: string;
  message: string;
  machinesBack: number;
  machines: number;
  maxTurns: number;
  maxUnavailable: number;
  budget: number;
  maxLeadersDown: number;
  /** Per machine: the most bytes its status showed received from the channel during the revert. */
  downloaded: Record<string, number>;
  /** Bytes of `to`'s artifacts the channel served during the revert. */
  channelBytes: number;
  /** The refusal read when `from` was targeted again. */
  refused: string;
  seconds: number;
}

async function liken(lab: Lab, args: string[]): Promise<string> {
  const r = await run(process.execPath, [
    likenEntry(),
    ...args,
    "--kubeconfig",
    lab.controlPlane.kubeconfig,
  ]);
  return r.stdout;
}

/** Bytes the channel served of a release's artifacts (not its release.yaml). */
function artifactBytes(lab: Lab, version: string): number {
  return ["vmlinuz", "rootfs.img"].reduce(
    (n, f) => n + lab.channel.bytesServed(`${version}/${f}`),
    0,
  );
}

async function cluster(lab: Lab): Promise<Cluster> {
  return lab.api.clusters.get(LAB_CLUSTER);
}

export async function runRevert(
  lab: Lab,
  log: (l: string) => void,
  how: RevertHow,
): Promise<RevertFigures> {
  const started = Date.now();
  const deadline = started + REVERT_DEADLINE_MS;
  const good = lab.releases[0]!;
  await until(`${good.version} recorded as the last known good`, deadline, async () =>
    (await cluster(lab)).status?.lastKnownGood?.version === good.version ? true : undefined,
  );
  const bad = await buildLabRelease(
    lab.channelDir,
    LAB_RUN_DIR,
    LAB_BAD_VERSION,
    "bad-after-promotion",
  );
  log(`revert: published ${bad.version}: it proves, and its service gate fails an hour later`);
  await forward(lab, bad, how, deadline, log);
  const observer = new RolloutObserver(lab.api, LAB_CLUSTER);
  await observer.start();
  const before = artifactBytes(lab, good.version);
  try {
    if (how === "threshold") {
      const offset = moveLabClock(BAD_AFTER_SECONDS);
      log(`revert: the lab's clock moves an hour on (${offset} s ahead of the wall clock)`);
    } else {
      log(`revert: liken rollout revert ${LAB_CLUSTER} --reason "the lab's scenario"`);
      await liken(lab, ["rollout", "revert", LAB_CLUSTER, "--reason", "the lab's scenario"]);
    }
    const c = await until("the revert recorded (status.revert)", deadline, async () => {
      const x = await cluster(lab);
      return x.status?.revert !== undefined && sameRelease(x.status.revert.from, bad)
        ? x
        : undefined;
    });
    const r = c.status!.revert!;
    const why = c.status?.conditions?.find((x) => x.type === "Reverted");
    log(`revert: ${why?.reason ?? r.trigger}${r.gate ? `, gate ${r.gate}` : ""}: ${r.message}`);
    await watchRollout(lab, observer, good.version, deadline, log);
    const channelBytes = artifactBytes(lab, good.version) - before;
    const refused = await targetAgain(lab, good, bad, deadline, log);
    const budget = Number(c.spec.disruption?.maxUnavailable ?? 1);
    return {
      how,
      from: bad.version,
      to: good.version,
      reason: why?.reason ?? "",
      gate: r.gate ?? "",
      message: r.message,
      machinesBack: observer.current().machines.filter((m) => m.status?.version === good.version)
        .length,
      machines: lab.fleet.length,
      maxTurns: observer.maxTurns,
      maxUnavailable: observer.maxUnavailable,
      budget,
      maxLeadersDown: observer.maxLeadersDown,
      downloaded: Object.fromEntries(
        lab.fleet.map((m) => [m.name, observer.downloaded.get(m.name) ?? 0]),
      ),
      channelBytes,
      refused,
      seconds: Math.round((Date.now() - started) / 1000),
    };
  } finally {
    observer.stop();
  }
}

/** Catalog `bad`, target it (with the revert policy for the threshold), roll the fleet onto it. */
async function forward(
  lab: Lab,
  bad: LabRelease,
  how: RevertHow,
  deadline: number,
  log: (l: string) => void,
): Promise<void> {
  const c = await cluster(lab);
  const policy = how === "threshold" ? { revert: { maxFailures: LAB_MAX_FAILURES } } : {};
  log(
    `revert: catalog ${bad.version}, set spec.version` +
      (how === "threshold" ? `, spec.rollout.revert.maxFailures ${LAB_MAX_FAILURES}` : ""),
  );
  await lab.api.clusters.patch(LAB_CLUSTER, {
    spec: {
      version: bad.version,
      releases: {
        catalog: [...(c.spec.releases.catalog ?? []), { version: bad.version, digest: bad.digest }],
      },
      rollout: { ...c.spec.rollout, ...policy },
    },
  });
  const observer = new RolloutObserver(lab.api, LAB_CLUSTER);
  await observer.start();
  try {
    await watchRollout(lab, observer, bad.version, deadline, log);
  } finally {
    observer.stop();
  }
  await until(`${bad.version} promoted everywhere (the last known good)`, deadline, async () =>
    (await cluster(lab)).status?.lastKnownGood?.version === bad.version ? true : undefined,
  );
  log(`revert: ${bad.version} promoted on every machine: it is the last known good`);
}

/**
 * spec.version back to the good release (ending the revert), then the revoked one again:
 * the refusal (Progressing ReleaseRevoked) is what a person reads. The fleet stays put.
 */
async function targetAgain(
  lab: Lab,
  good: LabRelease,
  bad: LabRelease,
  deadline: number,
  log: (l: string) => void,
): Promise<string> {
  await lab.api.clusters.patch(LAB_CLUSTER, { spec: { version: good.version } });
  log(`revert: spec.version ${good.version}: the revert ends (Reverted RevertSuperseded)`);
  // Only once cluster-operator saw it: a spec.version naming the revert's `from` while the
  // revert is in force is the revert itself, not a new target.
  await until("the revert ended (Reverted RevertSuperseded)", deadline, async () => {
    const c = await cluster(lab);
    const why = c.status?.conditions?.find((x) => x.type === "Reverted");
    return c.status?.revert === undefined && why?.reason === "RevertSuperseded" ? true : undefined;
  });
  log(`revert: spec.version ${bad.version} again`);
  await lab.api.clusters.patch(LAB_CLUSTER, { spec: { version: bad.version } });
  const refused = await until(`${bad.version} refused again`, deadline, async () => {
    const p = (await cluster(lab)).status?.conditions?.find((x) => x.type === "Progressing");
    return p?.reason === "ReleaseRevoked" ? `${p.reason}: ${p.message}` : undefined;
  }).catch((e: unknown) => {
    throw new LikenError("LIKEN_LAB_REVERT", `the revoked release was not refused: ${String(e)}`);
  });
  log(`revert: refused: ${refused}`);
  await lab.api.clusters.patch(LAB_CLUSTER, { spec: { version: good.version } });
  return refused;
}

/** The summary a person reads (and the e2e test parses: the JSON after "figures: "). */
export function revertSummary(f: RevertFigures): string {
  const bytes = Object.entries(f.downloaded)
    .map(([m, b]) => `${m} ${b}`)
    .join(", ");
  return [
    `lab: revert (${f.how}) of ${f.from} to ${f.to}: ${f.reason}${f.gate ? `, gate ${f.gate}` : ""}; ` +
      `${f.machinesBack}/${f.machines} machines back on ${f.to}, max turns in flight ${f.maxTurns}, ` +
      `max unavailable ${f.maxUnavailable} (budget ${f.budget}), max leaders down ${f.maxLeadersDown}, ` +
      `${f.seconds} s`,
    `lab: bytes downloaded during the revert: ${bytes}; the channel served ${f.channelBytes} bytes of ${f.to}'s artifacts`,
    `lab: ${f.from} targeted again: ${f.refused}`,
    `lab: figures: ${JSON.stringify(f)}`,
  ].join("\n");
}

/** The gate the threshold scenario trips, for the test to compare. */
export const LAB_TRIPPED_GATE = LAB_SERVICE_GATE;
