// Whether the operator's Machine view is at least as new as the Cluster it decides on. A turn
// record is released as GivenBack or MachineDeleted on what the Machines say (a request
// withdrawn, a Machine gone); a copy that just won a 409 (the Cluster read fresh) or just woke
// (its caches as old as the pause) may hold a Machine cache older than that Cluster, in which
// the record's machine has not asked yet, or not been created yet, as another copy saw it. It
// must not release a record on that (docs/adr/operator-fresh-machine-view.md).
//
// resourceVersions are compared as numbers. Kubernetes calls them opaque; every API server
// backed by etcd3 (all of them today) hands out one revision counter shared by every object,
// which is what makes a watch resumable from any list. Anything unreadable as a number counts
// as "not known to be fresh": the operator reads the Machines again rather than guess.

/** True when the view at `view` has seen every write up to `decision` (both resourceVersions). */
export function seenUpTo(view: string | undefined, decision: string | undefined): boolean {
  const a = revision(view);
  const b = revision(decision);
  return a !== undefined && b !== undefined && a >= b;
}

function revision(rv: string | undefined): bigint | undefined {
  if (rv === undefined || !/^[0-9]{1,30}$/.test(rv)) return undefined;
  return BigInt(rv);
}
