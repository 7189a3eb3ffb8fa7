// `npm run lab -- --demo`: the rollout exactly as the product page tells it, scripted:
// poll the channel, catalog the newest release, point spec.version at it, approve the
// Manual machines as they ask, and watch until the Cluster is Ready. An independent
// observer of the API objects measures turns in flight and leaders down throughout.
import { createHash } from "node:crypto";
import { writeFile } from "node:fs/promises";
import { setTimeout as sleep } from "node:timers/promises";
import { request } from "undici";
import { ANNOTATION_CHECK_RELEASES, type Cluster } from "../api/types.js";
import { LikenError } from "../errors.js";
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { LAB_CLUSTER, type Lab } from "./lab.js";
import { RolloutObserver } from "./observer.js";
import { likenEntry } from "../cli/entry.js";
import { renderTimelineSvg, timelineRows } from "../cli/views/timeline.js";
import { LAB_TIMELINE } from "./paths.js";

const run = promisify(execFile);

/** What a person types: `liken <args>` (the real command), against the lab's API. */
async function liken(lab: Lab, args: string[]): Promise<void> {
  await run(process.execPath, [likenEntry(), ...args, "--kubeconfig", lab.controlPlane.kubeconfig]);
}

/** What a person types: `liken approve-reboot lab <machine>`. */
async function approveReboot(lab: Lab, machine: string): Promise<void> {
  await liken(lab, ["approve-reboot", LAB_CLUSTER, machine]);
}

/** A 5-machine rollout finishes in well under this on 2 cores; past it the demo reports a stall. */
const DEMO_DEADLINE_MS = 5 * 60_000;
const POLL_MS = 250;

export async function until<T>(
  what: string,
  deadline: number,
  probe: () => Promise<T | undefined>,
): Promise<T> {
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > deadline) {
      throw new LikenError("LIKEN_LAB_DEMO_STALLED", `the rollout did not reach "${what}" in time`);
    }
    await sleep(POLL_MS);
  }
}

/** The digest of a release as the page computes it: sha256 of <source>/<version>/release.yaml. */
async function releaseDigest(source: string, version: string): Promise<string> {
  const res = await request(`${source}/${version}/release.yaml`);
  if (res.statusCode !== 200) {
    throw new LikenError(
      "LIKEN_LAB_CHANNEL",
      `${source}/${version}/release.yaml answered ${res.statusCode}`,
    );
  }
  const body = Buffer.from(await res.body.arrayBuffer());
  return `sha256:${createHash("sha256").update(body).digest("hex")}`;
}

function stallReason(c: Cluster | undefined): string {
  const p = c?.status?.conditions?.find((x) => x.type === "Progressing");
  return p ? `${p.reason}: ${p.message}` : "no Progressing condition yet";
}

export async function runDemo(lab: Lab, log: (l: string) => void): Promise<string> {
  const started = Date.now();
  const deadline = started + DEMO_DEADLINE_MS;
  const observer = new RolloutObserver(lab.api, LAB_CLUSTER);
  await observer.start();
  try {
    // 1. Find the release: ask the cluster to poll the channel now.
    log(`demo: kubectl annotate cluster --all --overwrite ${ANNOTATION_CHECK_RELEASES}=...`);
    await lab.api.clusters.patch(LAB_CLUSTER, {
      metadata: { annotations: { [ANNOTATION_CHECK_RELEASES]: new Date().toISOString() } },
    });
    const target = await until("AVAILABLE shows the newest release", deadline, async () => {
      const c = await lab.api.clusters.get(LAB_CLUSTER);
      return c.status?.available && c.status.available !== c.spec.version
        ? c.status.available
        : undefined;
    });
    // 2. Catalog the release and set the target.
    const digest = await releaseDigest(lab.channel.url, target);
    log(`demo: catalog ${target} (${digest}) and set spec.version`);
    const c = await lab.api.clusters.get(LAB_CLUSTER);
    await lab.api.clusters.patch(LAB_CLUSTER, {
      spec: {
        version: target,
        releases: { catalog: [...(c.spec.releases.catalog ?? []), { version: target, digest }] },
      },
    });
    // 3. Hold one machine at its release (a disk under investigation, say): the rollout goes
    //    on without it, and MACHINES counts it apart.
    const held = lab.fleet[lab.fleet.length - 1]!.name;
    log(`demo: liken machine hold ${held} --reason "the demo holds one machine"`);
    await liken(lab, ["machine", "hold", held, "--reason", "the demo holds one machine"]);
    // 4. Watch, approving Manual machines as they ask, until all but the held one moved.
    await watchRollout(lab, observer, target, deadline, log, new Set([held]));
    log(`demo: MACHINES ${observer.current().cluster?.status?.machines ?? "?"}`);
    // 5. Release it: it catches up within the budget like any machine.
    log(`demo: liken machine unhold ${held}`);
    await liken(lab, ["machine", "unhold", held]);
    await watchRollout(lab, observer, target, deadline, log);
    const n = lab.fleet.length;
    const seconds = ((Date.now() - started) / 1000).toFixed(1);
    return `lab: rollout to ${target} complete: ${n}/${n} machines, max turns in flight ${observer.maxTurns}, max leaders down ${observer.maxLeadersDown}, ${seconds} s`;
  } finally {
    observer.stop();
    // The picture of the rollout, whether it completed or not (a stalled one is where it helps).
    const end = Date.now();
    const svg = renderTimelineSvg(timelineRows(observer.samples, end), {
      title: `liken lab: the demo's rollout of cluster ${LAB_CLUSTER}`,
      start: started,
      end,
    });
    // Best effort: a failed write must not hide the demo's own outcome.
    await writeFile(LAB_TIMELINE, svg).then(
      () => log(`demo: the rollout's timeline: ${LAB_TIMELINE}`),
      (e: unknown) => log(`demo: could not write ${LAB_TIMELINE}: ${(e as Error).message}`),
    );
  }
}

/**
 * Watches the rollout to `target` until every machine runs it and the Cluster is Ready,
 * approving the Manual machines as they ask (what a person does with `liken approve-reboot`).
 */
export async function watchRollout(
  lab: Lab,
  observer: RolloutObserver,
  target: string,
  deadline: number,
  log: (l: string) => void,
  /** Machines a person holds: the rollout is complete without them. */
  held: ReadonlySet<string> = new Set(),
): Promise<void> {
  const approved = new Set<string>();
  await until("every machine on the new release and the Cluster Ready", deadline, async () => {
    const { cluster, machines } = observer.current();
    for (const m of machines) {
      if (
        m.status?.step === "RebootPending" &&
        m.status.staged?.version === target &&
        !approved.has(m.metadata.name)
      ) {
        log(`demo: liken approve-reboot ${LAB_CLUSTER} ${m.metadata.name}`);
        await approveReboot(lab, m.metadata.name);
        approved.add(m.metadata.name);
      }
      if (m.status?.step === "Failed") {
        throw new LikenError(
          "LIKEN_LAB_DEMO_FAILED",
          `machine ${m.metadata.name} failed: ${m.status.lastTrial?.reason ?? "see kubectl describe machine"}`,
        );
      }
    }
    const done = machines.filter(
      (m) => m.status?.version === target && m.status.step === "Ready",
    ).length;
    const want = lab.fleet.length - held.size;
    return cluster?.status?.phase === "Ready" && done === want ? done : undefined;
  }).catch((e: unknown) => {
    throw new LikenError(
      "LIKEN_LAB_DEMO_STALLED",
      `${(e as Error).message}; Progressing ${stallReason(observer.current().cluster)}`,
      { cause: e },
    );
  });
}
