// Whether a drain under way is still wanted. The agent drains for the release staged in its
// other slot; when the Cluster's target moves during the drain (a retarget to another release,
// or a revert to the one the machine runs), evicting on would take workloads off a node that
// is not going to reboot for that release. The daemon asks this at every change its watches
// see during a drain; a reason stops the drain, and the drain module undoes liken's cordon
// (docs/drain.md, "Stopping a drain").
import { sameRelease, type ReleaseRef } from "../api/types.js";
import { runsTargetVersion, type Observed } from "./steps.js";

/** Why the drain for `draining` must stop now, or undefined while it is still wanted. */
export function drainStopReason(
  o: Pick<Observed, "apiReachable" | "target" | "running">,
  draining: ReleaseRef,
): string | undefined {
  // An unread Cluster is no new target: the drain goes on (its deadline still holds).
  if (!o.apiReachable) return undefined;
  const t = o.target;
  if (t === undefined) return `the Cluster no longer names a target (it was ${draining.version})`;
  if (sameRelease(t, draining)) return undefined;
  if (runsTargetVersion(o.running.release, t)) {
    return `the target went back from ${draining.version} to ${t.version}, which this machine runs`;
  }
  if (t.version === draining.version) {
    return `the catalog entry of ${t.version} now names digest ${t.digest}, not the drained ${draining.digest}`;
  }
  return `the target changed from ${draining.version} to ${t.version}`;
}
