// When the kubelet began to stop each pod, on the kubelet's own clock: the `Killing` Events it
// posts ("Stopping container ...") as it sends SIGTERM. The scenario's drain checks time a pod's
// stop from here, not from the eviction's deletionTimestamp: that one is the API server's clock
// (the host's), while the container's finishedAt and the driver's log lines are the guest's,
// and a TCG guest's clock drifts from the host's by seconds over a run of several boots (CI saw
// a pod "stop" a second before it was asked to). Comparing only times of one clock keeps the
// checks exact to the API's whole-second truncation.
import { CoreV1Api, type CoreV1Event, type KubeConfig } from "@kubernetes/client-node";

/** Pod uid -> seconds since the epoch (kubelet's clock) of its first Killing event. */
export type KillingTimes = ReadonlyMap<string, number>;

/** From a namespace's Events: the first Killing each pod got from the kubelet. */
export function killingTimes(events: readonly CoreV1Event[]): Map<string, number> {
  const out = new Map<string, number>();
  for (const e of events) {
    const byKubelet = e.source?.component === "kubelet" || e.reportingComponent === "kubelet";
    const uid = e.involvedObject.uid;
    const when = e.firstTimestamp ?? e.eventTime ?? e.lastTimestamp;
    if (e.reason !== "Killing" || !byKubelet || e.involvedObject.kind !== "Pod") continue;
    if (uid === undefined || when === undefined) continue;
    const s = Math.floor(new Date(when).getTime() / 1000);
    out.set(uid, Math.min(out.get(uid) ?? s, s));
  }
  return out;
}

export async function readKillingTimes(kc: KubeConfig, namespace: string): Promise<KillingTimes> {
  const list = await kc
    .makeApiClient(CoreV1Api)
    .listNamespacedEvent({ namespace, fieldSelector: "reason=Killing" });
  return killingTimes(list.items);
}
