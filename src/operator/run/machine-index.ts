// The Machines of each Cluster, kept up to date by the Machine watch's events: a pass reads its
// Cluster's Machines without filtering the whole fleet's cache, and without a copy when none of
// them changed since the last pass (a tick over a quiet fleet rebuilds nothing). The array a
// pass gets is never changed afterwards: a change makes the next read build a new one, so a
// decision that is still running keeps the view it began with.
//
// After every list (the watcher's onSync) the index is rebuilt from the list: it then holds the
// very objects the watcher's cache holds, never a second copy of the fleet.
import type { Machine } from "../../api/index.js";

interface Entry {
  byName: Map<string, Machine>;
  /** The array last handed out; undefined once something changed since. */
  view: readonly Machine[] | undefined;
}

export class MachineIndex {
  private readonly clusters = new Map<string, Entry>();
  /** Each Machine's Cluster, to move it when spec.cluster changes. */
  private readonly clusterOf = new Map<string, string>();

  /** An added or modified Machine. */
  set(m: Machine): void {
    const name = m.metadata.name;
    const before = this.clusterOf.get(name);
    if (before !== undefined && before !== m.spec.cluster) this.remove(before, name);
    this.clusterOf.set(name, m.spec.cluster);
    const e = this.entry(m.spec.cluster);
    e.byName.set(name, m);
    e.view = undefined;
  }

  delete(m: Machine): void {
    const name = m.metadata.name;
    const cluster = this.clusterOf.get(name) ?? m.spec.cluster;
    this.clusterOf.delete(name);
    this.remove(cluster, name);
  }

  /** Everything again, from a list. */
  sync(machines: readonly Machine[]): void {
    this.clusters.clear();
    this.clusterOf.clear();
    for (const m of machines) this.set(m);
  }

  /** The Cluster a Machine of this name is in, as last seen. */
  clusterOfName(name: string): string | undefined {
    return this.clusterOf.get(name);
  }

  /** The Cluster's Machines; the same array as last time when none changed since. */
  of(cluster: string): readonly Machine[] {
    const e = this.clusters.get(cluster);
    if (e === undefined) return [];
    e.view ??= [...e.byName.values()];
    return e.view;
  }

  private entry(cluster: string): Entry {
    let e = this.clusters.get(cluster);
    if (e === undefined) {
      e = { byName: new Map(), view: undefined };
      this.clusters.set(cluster, e);
    }
    return e;
  }

  private remove(cluster: string, name: string): void {
    const e = this.clusters.get(cluster);
    if (e === undefined || !e.byName.delete(name)) return;
    e.view = undefined;
    if (e.byName.size === 0) this.clusters.delete(cluster);
  }
}
