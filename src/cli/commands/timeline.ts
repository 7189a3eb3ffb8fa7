// `liken status CLUSTER --timeline FILE`: watches the Cluster and its Machines, keeps a sample
// of the fleet at every change, and when the rollout settles (or on Ctrl-C) draws what it saw
// into an SVG file (src/cli/views/timeline.ts; docs/timeline.md). Started on a settled fleet
// it waits for the rollout to start (the edit of spec.version), then records it to the end.
import { writeFile } from "node:fs/promises";
import { LikenApi } from "../../api/client.js";
import { effectiveTarget } from "../../release-decision/view.js";
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

/**
 * Where a recording is: `syncing` until both watches listed what exists (a sample before that
 * is a partial picture: a Cluster without its Machines looks unsettled, and a recording that
 * took it for a rollout ended at once on the next, whole, sample: issue 42), `waiting` for a
 * rollout to start on a settled fleet, `moving` once one did, `done` when it settled again.
 */
export type RecordingPhase = "syncing" | "waiting" | "moving" | "done";

export function recordingStep(
  phase: RecordingPhase,
  o: { synced: boolean; settled: boolean },
): RecordingPhase {
  switch (phase) {
    case "syncing":
      if (!o.synced) return "syncing";
      return o.settled ? "waiting" : "moving";
    case "waiting":
      return o.settled ? "waiting" : "moving";
    case "moving":
      return o.settled ? "done" : "moving";
    case "done":
      return "done";
    default: {
      const never: never = phase;
      return never;
    }
  }
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
  let phase: RecordingPhase = "syncing";
  let synced = false;
  let finish: () => void = () => undefined;
  const done = new Promise<void>((r) => (finish = r));
  const note = (): void => {
    const s = sampleOf(current, [...machines.values()], Date.now());
    if (synced) samples.push(s);
    const before = phase;
    phase = recordingStep(phase, { synced, settled: settled(current, s) });
    if (before !== phase && phase === "waiting") {
      say(`${name} is settled; waiting for its rollout to start (edit spec.version), or Ctrl-C`);
    }
    if (before !== phase && phase === "moving") say(`${name}: the rollout is under way`);
    if (phase === "done") finish();
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
  // Both watches have listed: from here a sample is the whole picture.
  synced = true;
  note();
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
  // Set by the watches' callbacks: TypeScript cannot see it change.
  const last = phase as RecordingPhase;
  if (last !== "done" && last !== "moving") {
    say(`no rollout of ${name} was seen: ${file} not written`);
    return;
  }
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
