// The torture run's independent watcher: its own watches of the Cluster and the Machines, and
// its own reads of the Nodes, on the API server; never the operator's memory. It writes what
// it sees as observations of the invariant checker's History (src/invariants/history.ts):
//   - every Cluster and Machine as read;
//   - a Node's Ready and bootID (a watch too: a rejoin is seen within milliseconds, as the
//     agent sees it), and a rejoin once the Node shows the machine's current boot, or once it
//     is uncordoned, Ready in the current boot (a drain that stopped without a reboot, its
//     target changed or recalled: back in service, as the operator counts it);
//   - a turn read: the machine's turn record present in the Cluster during the machine's
//     current boot (what the agent must have read before it reboots; from outside, that a
//     record existed for this boot is the evidence there is).
import type { LikenApi } from "../api/client.js";
import type { Cluster, Machine } from "../api/types.js";
import { ResourceWatcher } from "../api/watch.js";
import { Rest, loadRestConfig } from "../api/rest.js";
import { RestResource } from "../api/rest-resource.js";
import type { NodeView } from "../agent/api.js";
import type { Observation } from "../invariants/index.js";

/** How the watcher learns a machine's current boot (its boot_id file) and when it began. */
export interface BootSource {
  current(machine: string): { bootId: string; at: number } | undefined;
}

export class TortureWatcher {
  readonly history: Observation[] = [];
  private readonly clusterWatch: ResourceWatcher<Cluster>;
  private readonly machineWatch: ResourceWatcher<Machine>;
  private readonly nodeWatch: ResourceWatcher<NodeView>;
  private readonly nodes = new Map<string, string>();
  private readonly rejoined = new Set<string>();
  /** Whether each Node was last seen cordoned (spec.unschedulable). */
  private readonly cordoned = new Map<string, boolean>();
  private readonly turnsRead = new Set<string>();
  private cluster: Cluster | undefined;

  constructor(
    api: LikenApi,
    kubeconfig: string,
    private readonly clusterName: string,
    private readonly boots: BootSource,
  ) {
    const rest = new Rest(loadRestConfig(kubeconfig), "liken-torture");
    const nodes = new RestResource<NodeView>(rest, "Node", "/api/v1/nodes", "liken-torture");
    this.nodeWatch = new ResourceWatcher(nodes, {
      onSync: (all) => all.forEach((n) => this.onNode(Date.now(), n)),
      onChange: (e) => {
        if (e.type === "deleted") {
          this.history.push({ kind: "node-deleted", at: Date.now(), name: e.object.metadata.name });
        } else this.onNode(Date.now(), e.object);
      },
    });
    this.clusterWatch = new ResourceWatcher(api.clusters, {
      onSync: (all) => {
        const c = all.find((x) => x.metadata.name === clusterName);
        if (c) this.onCluster(c);
      },
      onChange: (e) => {
        if (e.object.metadata.name === clusterName && e.type !== "deleted")
          this.onCluster(e.object);
      },
    });
    this.machineWatch = new ResourceWatcher(api.machines, {
      onSync: (all) => all.forEach((m) => this.onMachine(m)),
      onChange: (e) => {
        if (e.type === "deleted") {
          this.history.push({
            kind: "machine-deleted",
            at: Date.now(),
            name: e.object.metadata.name,
          });
        } else this.onMachine(e.object);
      },
    });
  }

  async start(): Promise<void> {
    await Promise.all([
      this.clusterWatch.start(),
      this.machineWatch.start(),
      this.nodeWatch.start(),
    ]);
  }

  stop(): void {
    this.clusterWatch.stop();
    this.machineWatch.stop();
    this.nodeWatch.stop();
  }

  private onCluster(c: Cluster): void {
    const at = Date.now();
    this.cluster = c;
    this.history.push({ kind: "cluster", at, cluster: c });
    this.noteTurns(at);
  }

  private noteTurns(at: number): void {
    for (const t of this.cluster?.status?.rebootTurns ?? []) {
      const boot = this.boots.current(t.machine);
      if (boot === undefined) continue;
      const key = `${t.machine}\u0000${t.grantedAt}\u0000${boot.bootId}`;
      if (this.turnsRead.has(key)) continue;
      this.turnsRead.add(key);
      // The record existed from its grant on (grantedAt has whole seconds: its floor is
      // never later than the grant), and in this boot from the boot's start on.
      const since = Math.max(Date.parse(t.grantedAt), boot.at + 1);
      this.history.push({
        kind: "turn-read",
        at: Math.min(since, at),
        machine: t.machine,
        bootId: boot.bootId,
        release: { version: t.version, digest: t.digest ?? "" },
      });
    }
  }

  private onMachine(m: Machine): void {
    if (m.spec.cluster !== this.clusterName) return;
    this.history.push({ kind: "machine", at: Date.now(), machine: m });
  }

  private onNode(at: number, n: NodeView & { spec?: { unschedulable?: boolean } }): void {
    const name = n.metadata.name;
    const bootId = n.status?.nodeInfo?.bootID ?? "";
    const conditions = n.status?.conditions ?? [];
    const ready = conditions.some((c) => c.type === "Ready" && c.status === "True");
    const seen = `${bootId}/${ready}`;
    if (this.nodes.get(name) !== seen) {
      this.nodes.set(name, seen);
      this.history.push({ kind: "node", at, name, ready, bootId });
    }
    const uncordoned = this.uncordoned(name, n.spec?.unschedulable === true);
    // A rejoin: the Node Ready with the machine's current boot (what the agent's proof reads).
    const current = ready && this.boots.current(name)?.bootId === bootId;
    if (current && !this.rejoined.has(bootId)) {
      this.rejoined.add(bootId);
      this.history.push({ kind: "rejoin", at, machine: name, bootId });
    } else if (current && uncordoned) {
      // Uncordoned in the same boot: a drain undone without a reboot (seed 636: a recall
      // stopped node-3's drain; the checker had it down for the rest of the run).
      this.history.push({ kind: "rejoin", at, machine: name, bootId });
    }
    // A turn read in a boot the Node just showed begun.
    this.noteTurns(at);
  }

  /** Whether the Node went from cordoned to schedulable with this read. */
  private uncordoned(name: string, cordoned: boolean): boolean {
    const was = this.cordoned.get(name) === true;
    this.cordoned.set(name, cordoned);
    return was && !cordoned;
  }
}
