// What the operator keeps of each watched object: what it reads, nothing it never reads. At
// 5,000 Machines the watch caches are most of its heap; a Machine as the API server sends it
// carries managedFields (one entry per writer, each a tree of every field it set: the agent's
// and the operator's status writes), often larger than the rest of the object, and the
// operator reads none of it. Trimmed on arrival (the watcher's `trim`), in place: the object
// was just parsed from the wire and nobody else holds it, so no copy is made.
//
// What is dropped is named here, not what is kept: the operator's rules read a Machine's
// spec, status and labels, a Cluster's annotations and generation, and more as they grow; a
// list of what is dropped cannot hide a field a new rule reads. A heartbeat Lease is the
// exception: the operator reads exactly its name, its machine label and its renewTime
// (heartbeats.ts), so it keeps exactly those.
//
// A write made from a trimmed object carries no managedFields: the API server keeps the ones
// it has when an update omits them (only an explicit empty list resets them).
import { LABEL_MACHINE } from "../../api/index.js";

/** The annotation `kubectl apply` (client-side) keeps: a copy of the whole object as applied. */
export const LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration";

interface Meta {
  metadata: { managedFields?: unknown; annotations?: Record<string, string> };
}

/** Drops metadata.managedFields and kubectl's last-applied copy, in place. */
export function trimObject<T extends Meta>(o: T): T {
  const meta = o.metadata as Meta["metadata"] | undefined;
  if (meta === undefined) return o;
  delete meta.managedFields;
  const a = meta.annotations;
  if (a !== undefined && LAST_APPLIED in a) {
    delete a[LAST_APPLIED];
    if (Object.keys(a).length === 0) delete meta.annotations;
  }
  return o;
}

/** A heartbeat Lease as the operator keeps it: what heartbeats.ts reads, and its place. */
export interface HeartbeatLease {
  metadata: { name: string; resourceVersion?: string; labels?: Record<string, string> };
  spec?: { renewTime?: string | Date };
}

interface LeaseIn {
  metadata?: { name?: string; resourceVersion?: string; labels?: Record<string, string> };
  spec?: { renewTime?: string | Date };
}

/** A new object with the Lease's name, resourceVersion, machine label and renewTime only. */
export function trimLease(l: LeaseIn): HeartbeatLease {
  const machine = l.metadata?.labels?.[LABEL_MACHINE];
  const rv = l.metadata?.resourceVersion;
  const renewTime = l.spec?.renewTime;
  return {
    metadata: {
      name: l.metadata?.name ?? "",
      ...(rv === undefined ? {} : { resourceVersion: rv }),
      ...(machine === undefined ? {} : { labels: { [LABEL_MACHINE]: machine } }),
    },
    ...(renewTime === undefined ? {} : { spec: { renewTime } }),
  };
}
