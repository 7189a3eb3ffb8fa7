// Which sources each downloading machine uses (docs/peers.md, docs/adr/peers-tree.md): a pure
// decider over what the operator sees (each Machine's zone and what it serves). A few machines
// fetch from the channel; the others take peers that hold the release staged, same zone first,
// the least loaded first, at most perHolder each (a tree: docs/adr/peers-tree.md); the others
// wait for the next holder to stage. Every
// machine keeps the channel as its last source (the seeded writer's rule), so an assignment can
// make a download slower, never wrong.

export interface Holder {
  machine: string;
  /** topology.kubernetes.io/zone of its Node, when set. */
  zone?: string;
  /** Where it serves (Machine status), e.g. http://10.0.0.7:7450/ */
  url: string;
}

export interface Downloader {
  machine: string;
  zone?: string;
}

export interface AssignInput {
  /** Machines that need the release and do not hold it, in a stable order (by name). */
  downloaders: readonly Downloader[];
  /** Machines that hold the release staged or running and serve it. */
  holders: readonly Holder[];
  /** How many machines fetch from the channel at once (spec.peers.channelMachines). */
  channelMachines: number;
  /** How many peers each machine is given (the first is its main source, the rest spares). */
  peersPerMachine: number;
  /**
   * How many machines a holder serves as main source at once (the tree's fan-out): with more
   * downloaders than the holders' seats, the rest wait for the next holder to stage.
   */
  perHolder: number;
  /** Downloads in progress per holder URL (as main source), from earlier assignments. */
  load?: Readonly<Record<string, number>>;
}

export type Assignment =
  | { machine: string; source: "channel" }
  | { machine: string; source: "peers"; peers: string[] }
  /** No free holder and the channel's seats are taken: this machine starts when one stages. */
  | { machine: string; source: "wait" };

/** The zone rank of a holder for a downloader: same zone first, then the rest. */
function rank(d: Downloader, h: Holder): number {
  return d.zone !== undefined && d.zone === h.zone ? 0 : 1;
}

export function assignSources(input: AssignInput): Assignment[] {
  const { holders } = input;
  if (holders.length === 0) {
    return input.downloaders.map((d, i) =>
      i < input.channelMachines
        ? { machine: d.machine, source: "channel" }
        : { machine: d.machine, source: "wait" },
    );
  }
  // Load: how many downloaders have a holder as their main source so far.
  const load = new Map<string, number>(holders.map((h) => [h.url, input.load?.[h.url] ?? 0]));
  return input.downloaders.map((d): Assignment => {
    const free = holders.some((h) => load.get(h.url)! < input.perHolder);
    if (!free) return { machine: d.machine, source: "wait" };
    const seat = (h: Holder): number => (load.get(h.url)! < input.perHolder ? 0 : 1);
    const order = [...holders].sort(
      (x, y) =>
        seat(x) - seat(y) ||
        rank(d, x) - rank(d, y) ||
        load.get(x.url)! - load.get(y.url)! ||
        x.machine.localeCompare(y.machine),
    );
    const peers = order.slice(0, Math.max(1, input.peersPerMachine)).map((h) => h.url);
    load.set(peers[0]!, load.get(peers[0]!)! + 1);
    return { machine: d.machine, source: "peers", peers };
  });
}
