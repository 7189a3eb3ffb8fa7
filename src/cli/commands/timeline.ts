// `liken status CLUSTER --timeline FILE`: watches the Cluster and its Machines, keeps a sample
// of the fleet at every change, and when the rollout settles (or on Ctrl-C) draws what it saw
// into an SVG file (src/cli/views/timeline.ts; docs/timeline.md). It records from the moment
// it starts: start it before (or with) the edit of spec.version to see the whole rollout.
import { writeFile } from "node:fs/promises";
import { LikenApi } from "../../api/client.js";
import { effectiveTarget } from "../../api/target.js";
import type { Cluster, Machine } from "../../api/types.js";
import { ResourceWatcher } from "../../api/watch.js";
import { LikenError } from "../../errors.js";
import {
  renderTimelineSvg,
  sampleOf,
  timelineRows,
  type TimelineSample,
} from "../views/timeline.js";

/**
 * Settled: every machine of the Cluster runs the release it moves to (effectiveTarget: the
 * spec's, the channel's under follow, or the last good one during a revert; a trial that failed
 * counts too), no turn is held, and the Cluster reads Ready. With no target (spec.version
 * unset or revoked) nothing moves, and a quiet fleet is settled. Only a change seen while unsettled ends the recording, so a
 * recording started on a quiet fleet waits for the next rollout.
 */
export function settled(cluster: Cluster | undefined, sample: TimelineSample): boolean {
  if (cluster === undefined || sample.machines.length === 0 || sample.turns.length > 0)
    return false;
  const target = effectiveTarget(cluster)?.version;
  const onTarget = sample.machines.every(
    (m) =>
      target === undefined || m.step === "Failed" || (m.step === "Ready" && m.version === target),
  );
  return onTarget && cluster.status?.phase === "Ready";
}

export async function recordTimeline(
  api: LikenApi,
  name: string,
  file: string,
  say: (line: string) => void,
): Promise<void> {
  const cluster = await api.clusters.get(name).catch((e: unknown) => {
    throw new LikenError(
      "LIKEN_CLI_NO_CLUSTER",
      `no Cluster named ${name} to record (${(e as Error).message}); list them with: kubectl get clusters`,
      { cause: e },
    );
  });
  let current: Cluster | undefined = cluster;
  const machines = new Map<string, Machine>();
  const samples: TimelineSample[] = [];
  const started = Date.now();
  let moving = false;
  let finish: () => void = () => undefined;
  const done = new Promise<void>((r) => (finish = r));
  const note = (): void => {
    const s = sampleOf(current, [...machines.values()], Date.now());
    samples.push(s);
    if (!settled(current, s)) moving = true;
    else if (moving) finish();
  };
  const cw = new ResourceWatcher(
    api.clusters,
    {
      onChange: (e) => {
        current = e.type === "deleted" ? undefined : e.object;
        note();
      },
    },
    { fieldSelector: `metadata.name=${name}` },
  );
  const mw = new ResourceWatcher(api.machines, {
    onSync: (all) => {
      for (const m of all) if (m.spec.cluster === name) machines.set(m.metadata.name, m);
      note();
    },
    onChange: (e) => {
      if (e.object.spec.cluster !== name) return;
      if (e.type === "deleted") machines.delete(e.object.metadata.name);
      else machines.set(e.object.metadata.name, e.object);
      note();
    },
  });
  await Promise.all([cw.start(), mw.start()]);
  say(
    `recording the rollout of ${name} into ${file}; it ends when the rollout settles, or on Ctrl-C`,
  );
  const interrupted = (): void => finish();
  process.once("SIGINT", interrupted);
  process.once("SIGTERM", interrupted);
  try {
    await done;
  } finally {
    process.off("SIGINT", interrupted);
    process.off("SIGTERM", interrupted);
    cw.stop();
    mw.stop();
  }
  const end = Date.now();
  await writeFile(
    file,
    renderTimelineSvg(timelineRows(samples, end), {
      title: `liken: the rollout of cluster ${name} to ${current?.spec.version ?? "?"}`,
      start: started,
      end,
    }),
  );
  say(`wrote ${file}: ${machines.size} machine(s), ${((end - started) / 1000).toFixed(1)} s`);
}
