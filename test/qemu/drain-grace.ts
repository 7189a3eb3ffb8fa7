// Whether each pod the drain evicted from a real node was stopped by its kubelet within its
// grace period, read off the watch record of the pods (test/support/drain-helpers.ts,
// recordNamespace) and the kubelet's Killing Events (kubelet-killing.ts). Pure, so a unit test
// shows each check fail.
//
// What a kubelet leaves on the API server and a simulator does not: as it sends SIGTERM it posts
// a Killing Event, and before it removes a pod that is being deleted it posts the container's
// terminated state (exit code, finishedAt); both are stamped on the kubelet's clock, so their
// difference is exact to the API's whole seconds, whatever the guest's clock says of the host's.
// The workload stays `lingerS` after SIGTERM and exits 0, so a stop by a kubelet that honoured
// the grace finishes no sooner than lingerS after its Killing, no later than the grace, with
// exit code 0 (a SIGKILL reads 137).
import type { V1Pod } from "@kubernetes/client-node";
import type { Recorded } from "../support/drain-invariants.js";
import type { KillingTimes } from "./kubelet-killing.js";

/**
 * Times on the API server are whole seconds (RFC 3339, truncated): a difference of two of them
 * can be up to a second short or long of the real one.
 */
const TRUNCATION_S = 1;

export interface PodStop {
  pod: string;
  /** Seconds from the kubelet's Killing to the container's finishedAt (both its clock). */
  stoppedAfterS: number;
  graceS: number;
  exitCode: number;
}

export interface GraceVerdict {
  stops: PodStop[];
  problems: string[];
}

const seconds = (t: Date | string | undefined): number | undefined =>
  t === undefined ? undefined : Math.floor(new Date(t).getTime() / 1000);

/** The pods that were on `node` and left it, each with its last recorded state before removal. */
function leftPods(log: readonly Recorded[], node: string): Map<string, V1Pod[]> {
  const byUid = new Map<string, V1Pod[]>();
  for (const e of [...log].sort((a, b) => a.rv - b.rv)) {
    if (e.kind !== "Pod") continue;
    const p = e.obj as V1Pod;
    if (p.spec?.nodeName !== node) continue;
    const uid = p.metadata?.uid ?? "";
    byUid.set(uid, [...(byUid.get(uid) ?? []), p]);
  }
  for (const [uid, seen] of byUid) {
    if (!seen.some((p) => p.metadata?.deletionTimestamp != null)) byUid.delete(uid);
  }
  return byUid;
}

function stopOf(
  name: string,
  seen: V1Pod[],
  lingerS: number,
  killing: KillingTimes,
): PodStop | string {
  const deleting = seen.find((p) => p.metadata?.deletionTimestamp != null)!;
  const graceS = deleting.metadata?.deletionGracePeriodSeconds ?? 0;
  const terminated = seen
    .flatMap((p) => p.status?.containerStatuses ?? [])
    .map((c) => c.state?.terminated)
    .find((t) => t?.finishedAt !== undefined);
  if (terminated === undefined) {
    return `pod ${name} left with no terminated container state: no kubelet stopped it`;
  }
  const killed = killing.get(deleting.metadata?.uid ?? "");
  if (killed === undefined) {
    return `pod ${name} has no Killing Event from the kubelet: nothing says when its stop began`;
  }
  const stop: PodStop = {
    pod: name,
    stoppedAfterS: seconds(terminated.finishedAt)! - killed,
    graceS,
    exitCode: terminated.exitCode,
  };
  if (terminated.exitCode !== 0) {
    return `pod ${name} exited ${terminated.exitCode} (${terminated.reason}), not 0: it was killed, not stopped within its grace of ${graceS} s`;
  }
  if (stop.stoppedAfterS < lingerS - TRUNCATION_S) {
    return `pod ${name} stopped ${stop.stoppedAfterS} s after the kubelet's Killing, sooner than its workload's ${lingerS} s after SIGTERM`;
  }
  if (stop.stoppedAfterS > graceS + TRUNCATION_S) {
    return `pod ${name} stopped ${stop.stoppedAfterS} s after the kubelet's Killing, past its grace of ${graceS} s`;
  }
  return stop;
}

/** Every pod that left `node`, checked; `expected` pods must have left. */
export function graceVerdict(
  log: readonly Recorded[],
  node: string,
  lingerS: number,
  expected: number,
  killing: KillingTimes,
): GraceVerdict {
  const stops: PodStop[] = [];
  const problems: string[] = [];
  const left = leftPods(log, node);
  for (const seen of left.values()) {
    const r = stopOf(seen[0]?.metadata?.name ?? "?", seen, lingerS, killing);
    if (typeof r === "string") problems.push(r);
    else stops.push(r);
  }
  if (left.size < expected) {
    problems.push(`${left.size} pods left ${node}, expected ${expected}`);
  }
  return { stops, problems };
}
