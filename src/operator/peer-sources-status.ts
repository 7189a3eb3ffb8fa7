// Cluster status.peerSources (docs/peers.md): what the operator tells each downloading machine
// to fetch the target from, made on every pass from the Machines' status by assignSources
// (peer-assign.ts). Holders are the machines whose status.peers serves the target; downloaders
// are the others that neither run nor have staged it. Only machines given peers are listed:
// a machine not listed fetches from the channel, as it always may.
import {
  PEERS_DEFAULTS,
  type Cluster,
  type Machine,
  type PeerSource,
  type ReleaseRef,
} from "../api/types.js";
import { assignSources } from "./peer-assign.js";

/**
 * The tree's fan-out and each machine's peers (one main source, two spares): the numbers
 * bench:fleet-download measured best on 30 machines (docs/adr/peers-tree.md).
 */
export const PER_HOLDER = 4;
export const PEERS_PER_MACHINE = 3;

export function peerSourcesOf(
  cluster: Cluster,
  machines: readonly Machine[],
  target: ReleaseRef | undefined,
): PeerSource[] | undefined {
  const peers = { ...PEERS_DEFAULTS, ...cluster.spec.peers };
  if (!peers.enabled || target === undefined) return undefined;
  const sorted = [...machines].sort((a, b) => (a.metadata.name < b.metadata.name ? -1 : 1));
  const holders = sorted.flatMap((m) => {
    const p = m.status?.peers;
    return p?.releases.some((r) => r.digest === target.digest)
      ? [{ machine: m.metadata.name, url: p.url }]
      : [];
  });
  const held = new Set(holders.map((h) => h.machine));
  const downloaders = sorted
    .filter(
      (m) =>
        !held.has(m.metadata.name) &&
        m.status?.digest !== target.digest &&
        m.status?.staged?.digest !== target.digest,
    )
    .map((m) => ({ machine: m.metadata.name }));
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
