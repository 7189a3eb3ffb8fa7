// Whether the drain of a real node removed a DRA claim holder before the driver that serves its
// claim, and the driver unprepared the claim while it still ran: read off the watch record of
// the pods (test/support/drain-invariants.ts, Recorded) and the driver's own log lines as the
// guest copies them to its serial console. Pure, so a unit test shows each check fail.
//
// What each side leaves behind:
// - the kubelet posts the holder's terminated container state (finishedAt) before it removes
//   the pod;
// - the DRA test driver (k8s.io/kubernetes test/e2e/dra/test-driver, kubelet-plugin mode), run
//   with -v=3, logs `"CDI file removed" path="<cdi-dir>/<driver>-<claim UID>-<request>.json"`
//   when the kubelet's NodeUnprepareResources reaches it (app/kubeletplugin.go,
//   nodeUnprepareResource); the kubelet writes that line into the pod's log file under
//   /var/log/pods in the CRI format `<RFC 3339 nano time> <stream> <F|P> <message>`, which
//   names the moment in full (klog's own header has no year);
// - as the kubelet begins to stop the driver pod (after its eviction), it posts a Killing Event
//   (kubelet-killing.ts).
// Every one of these times is the guest's clock; the eviction's deletionTimestamp is the API
// server's (the host's), which a TCG guest drifts from by seconds, so it only says whether the
// driver was asked to stop at all.
// The promise: holder stopped <= claim unprepared <= driver's stop began.
import type { V1Pod } from "@kubernetes/client-node";
import type { Recorded } from "../support/drain-invariants.js";
import type { KillingTimes } from "./kubelet-killing.js";

/**
 * Times on the API server are whole seconds (RFC 3339, truncated): a comparison with one of
 * them can be up to a second off. All compared times are the guest's clock, so no more.
 */
const TRUNCATION_S = 1;

/** The driver's log message for one unprepared claim (see above). */
const UNPREPARED = "CDI file removed";

/** A CRI log line: time, stream, partial/full tag, message. */
const CRI_LINE =
  /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)) (?:stdout|stderr) [FP] (.*)$/;

export interface DraOrder {
  /** Seconds since the epoch, each. */
  holderStopped: number;
  unprepared: number;
  /** The kubelet's Killing of the driver pod. */
  driverStopBegan: number;
}

export interface DraVerdict {
  order?: DraOrder;
  problems: string[];
}

export interface DraRoles {
  node: string;
  /** The pod that holds the claim. */
  holder: (p: V1Pod) => boolean;
  /** The driver's pod on `node`. */
  driver: (p: V1Pod) => boolean;
  claimUid: string;
}

const seconds = (t: Date | string): number => new Date(t).getTime() / 1000;

/** Every recorded state of the first pod on `node` that `is` picks, oldest first. */
function statesOf(log: readonly Recorded[], node: string, is: (p: V1Pod) => boolean): V1Pod[] {
  const pods = [...log]
    .sort((a, b) => a.rv - b.rv)
    .filter((e) => e.kind === "Pod")
    .map((e) => e.obj as V1Pod)
    .filter((p) => p.spec?.nodeName === node && is(p));
  const uid = pods[0]?.metadata?.uid;
  return pods.filter((p) => p.metadata?.uid === uid);
}

/** When the driver logged the unprepare of `claimUid`, from its CRI log lines. */
export function unpreparedAt(lines: readonly string[], claimUid: string): number | undefined {
  for (const line of lines) {
    const m = CRI_LINE.exec(line.trim());
    if (m === null) continue;
    const [, time, message] = m;
    if (message!.includes(UNPREPARED) && message!.includes(claimUid)) return seconds(time!);
  }
  return undefined;
}

/** When the holder's container finished, or why that is not known. */
function holderStopped(holder: V1Pod[], node: string): number | string {
  if (holder.length === 0) return `no claim holder pod was recorded on ${node}`;
  const finishedAt = holder
    .flatMap((p) => p.status?.containerStatuses ?? [])
    .map((c) => c.state?.terminated?.finishedAt)
    .find((t) => t !== undefined);
  if (finishedAt === undefined) {
    return `claim holder ${nameOf(holder)} has no terminated container state: no kubelet stopped it`;
  }
  return seconds(finishedAt);
}

/** When the kubelet began to stop the driver pod (its Killing), or why that is not known. */
function driverStopBegan(driver: V1Pod[], node: string, killing: KillingTimes): number | string {
  if (driver.length === 0) return `no driver pod was recorded on ${node}`;
  const deleting = driver.find((p) => p.metadata?.deletionTimestamp != null);
  if (deleting === undefined) {
    return `driver pod ${nameOf(driver)} was never asked to stop (no deletionTimestamp)`;
  }
  return (
    killing.get(deleting.metadata?.uid ?? "") ??
    `driver pod ${nameOf(driver)} has no Killing Event from the kubelet: nothing says when its stop began`
  );
}

const nameOf = (states: V1Pod[]): string => states[0]?.metadata?.name ?? "?";

export function draVerdict(
  log: readonly Recorded[],
  driverLines: readonly string[],
  roles: DraRoles,
  killing: KillingTimes,
): DraVerdict {
  const holder = statesOf(log, roles.node, roles.holder);
  const driver = statesOf(log, roles.node, roles.driver);
  const stopped = holderStopped(holder, roles.node);
  const unprepared =
    unpreparedAt(driverLines, roles.claimUid) ??
    `the driver logged no "${UNPREPARED}" for claim ${roles.claimUid} in ${driverLines.length} console line(s): the kubelet's NodeUnprepareResources did not reach it (is it run with -v=3, and does its log reach the console?)`;
  const began = driverStopBegan(driver, roles.node, killing);
  const problems = [stopped, unprepared, began].filter((x) => typeof x === "string");
  if (typeof stopped === "string" || typeof unprepared === "string" || typeof began === "string") {
    return { problems };
  }

  const order: DraOrder = { holderStopped: stopped, unprepared, driverStopBegan: began };
  if (order.unprepared < order.holderStopped - TRUNCATION_S) {
    problems.push(
      `the driver unprepared claim ${roles.claimUid} ${(order.holderStopped - order.unprepared).toFixed(1)} s before its holder ${nameOf(holder)} stopped`,
    );
  }
  if (order.unprepared > order.driverStopBegan + TRUNCATION_S) {
    problems.push(
      `the driver unprepared claim ${roles.claimUid} ${(order.unprepared - order.driverStopBegan).toFixed(1)} s after the kubelet began to stop its own pod ${nameOf(driver)}: the drain removed the driver first`,
    );
  }
  return { order, problems };
}
