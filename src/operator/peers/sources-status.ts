// Cluster status.peerSources (docs/peers.md): what the operator tells each downloading machine
// to fetch the target from, made on every pass from the Machines' status by assignSources
// (peer-assign.ts). Holders are the machines whose status.peers serves the target and that are
// up (not Lost, not rebooting: a down machine's status.peers is stale, it names a server that is
// gone); downloaders are the others that neither run nor have staged it. Each one's zone is its
// Machine's topology.kubernetes.io/zone label. Only machines given peers are listed: a machine
// not listed fetches from the channel, as it always may. A holder is handed out at its Node's
// address only (peer-address.ts): never at a URL its own Machine status names.
import {
  PEERS_DEFAULTS,
  type Cluster,
  type Machine,
  type PeerSource,
  type ReleaseRef,
} from "../../api/types.js";
import { assignSources } from "./assign.js";
import { tiedPeerUrl, type NodeAddress } from "./address.js";

/**
 * The tree's fan-out and each machine's peers (one main source, two spares): the numbers
 * bench:fleet-download measured best on 30 machines (docs/adr/peers-tree.md).
 */
export const PER_HOLDER = 4;
export const PEERS_PER_MACHINE = 3;

/**
 * The zone label Kubernetes sets on Nodes; the operator reads it on each Machine (it watches
 * Machines, not Nodes): label a Machine as its Node is labelled.
 */
export const ZONE_LABEL = "topology.kubernetes.io/zone";

/** A machine and its zone, when its Machine carries the label. */
function located(m: Machine): { machine: string; zone?: string } {
  const zone = m.metadata.labels?.[ZONE_LABEL];
  return zone === undefined ? { machine: m.metadata.name } : { machine: m.metadata.name, zone };
}

/**
 * Whether a machine's peer server can be up: not Lost (no heartbeat: `lost`, as decide judges
 * it, or the step another copy recorded) and not going through a reboot, whose next boot's
 * agent reports its own status.peers (the one seen now names a server that is gone).
 */
function up(m: Machine, lost: ReadonlySet<string>): boolean {
  if (lost.has(m.metadata.name) || m.status?.step === "Lost") return false;
  return m.status?.updateStage !== "Rebooting";
}

/** The Nodes whose addresses peerSourcesOf needs: those of the machines serving, peers on. */
export function servingNodes(cluster: Cluster, machines: readonly Machine[]): string[] {
  if (cluster.spec.peers?.enabled !== true) return [];
  return machines.filter((m) => m.status?.peers !== undefined).map((m) => m.spec.nodeName);
}

export function peerSourcesOf(
  cluster: Cluster,
  machines: readonly Machine[],
  target: ReleaseRef | undefined,
  /** The machines decide judged Lost this pass (machine-view.ts isLost). */
  lost: ReadonlySet<string> = new Set(),
  /**
   * Each Node's addresses, by Node name (peer-address.ts NodeAddresses): a holder is handed
   * out only at an address tied to its Node, never at the URL its Machine status says.
   */
  nodes: ReadonlyMap<string, readonly NodeAddress[]> = new Map(),
): PeerSource[] | undefined {
  const peers = { ...PEERS_DEFAULTS, ...cluster.spec.peers };
  if (!peers.enabled || target === undefined) return undefined;
  const sorted = [...machines].sort((a, b) => (a.metadata.name < b.metadata.name ? -1 : 1));
  const serving = sorted.filter((m) =>
    m.status?.peers?.releases.some((r) => r.digest === target.digest),
  );
  const holders = serving
    .filter((m) => up(m, lost))
    .flatMap((m) => {
      const tied = tiedPeerUrl(m.metadata.name, m.status!.peers!.url, nodes.get(m.spec.nodeName));
      return "url" in tied ? [{ ...located(m), url: tied.url }] : [];
    });
  const held = new Set(serving.map((m) => m.metadata.name));
  const downloaders = sorted
    .filter(
      (m) =>
        !held.has(m.metadata.name) &&
        m.status?.digest !== target.digest &&
        m.status?.staged?.digest !== target.digest,
    )
    .map(located);
  const list = assignSources({
    downloaders,
    holders,
    channelMachines: peers.channelMachines,
    peersPerMachine: PEERS_PER_MACHINE,
    perHolder: PER_HOLDER,
  }).flatMap((a) =>
    a.source === "peers" ? [{ machine: a.machine, digest: target.digest, peers: a.peers }] : [],
  );
  return list.length === 0 ? undefined : list;
}
