// Where a holder may be fetched from (docs/peers.md, "Which address is handed out"): Machine
// status.peers.url is whatever string that machine's identity writes, and every downloader the
// operator assigns would fetch from it. So the operator hands out only an address it can tie to
// the machine by other means: its Node's address (reported by the kubelet and the cloud
// provider, not by liken's agent), with the port the agent says it serves on. A pure decider
// (table tests: test/unit/peer-address.test.ts); NodeAddresses reads and caches the Nodes.
import { CoreV1Api, type KubeConfig } from "@kubernetes/client-node";
import { isNotFound, toApiError } from "../../api/errors.js";
import { nodeBootOf, type NodeBoot, type NodeBoots } from "../view/node-boot.js";

/** A Node's status.addresses entry. */
export interface NodeAddress {
  type: string;
  address: string;
}

/** Why a machine's advertised peer URL is not handed out (docs/peers.md). */
export type PeerAddressRefusal = "NotAPeerUrl" | "NoNodeAddress";

/** The address types a peer is reached at, in order of preference. */
const REACHABLE = ["InternalIP", "ExternalIP"] as const;

/**
 * The URL handed out for a machine that advertises `advertised` and whose Node has
 * `addresses`: http://<the Node's address>:<the advertised port>/. The advertised host is used
 * only when it is one of the Node's own addresses; otherwise the Node's InternalIP (else its
 * ExternalIP) replaces it. Refused: a URL that is not http://host:port/ (credentials, a path,
 * a query), or a Node without an IP address.
 */
export function tiedPeerUrl(
  machine: string,
  advertised: string,
  addresses: readonly NodeAddress[] | undefined,
): { url: string } | { refused: PeerAddressRefusal; message: string } {
  let u: URL;
  try {
    u = new URL(advertised);
  } catch {
    u = new URL("invalid:");
  }
  if (
    u.protocol !== "http:" ||
    u.port === "" ||
    u.username !== "" ||
    u.password !== "" ||
    u.pathname !== "/" ||
    u.search !== "" ||
    u.hash !== ""
  ) {
    return {
      refused: "NotAPeerUrl",
      message: `machine ${machine} advertises ${JSON.stringify(advertised.slice(0, 200))} in status.peers.url, not http://<host>:<port>/; it is not handed out to any downloader (the agent writes this itself: look at its version and agent.yaml peersAddress)`,
    };
  }
  const own = (addresses ?? []).filter((a) => (REACHABLE as readonly string[]).includes(a.type));
  const host = u.hostname.replace(/^\[(.*)\]$/, "$1");
  const chosen =
    own.find((a) => a.address === host) ??
    REACHABLE.map((t) => own.find((a) => a.type === t)).find((a) => a !== undefined);
  if (chosen === undefined) {
    return {
      refused: "NoNodeAddress",
      message: `machine ${machine}'s Node reports no InternalIP or ExternalIP address, so no address can be tied to it; it serves no downloader until its Node does (kubectl get node ${machine} -o wide)`,
    };
  }
  const h = chosen.address.includes(":") ? `[${chosen.address}]` : chosen.address;
  return { url: `http://${h}:${u.port}/` };
}

/**
 * The Nodes' addresses, read on demand and read again every minute while they are asked for:
 * the operator watches Machines, not Nodes (a Node object is large, and only the holders' are
 * needed). A Node not read yet has no address this pass; `changed` is told whenever a read
 * changes what is known, and the next pass hands the holder out at its new address. The same
 * reads give each Node's boot (../view/node-boot.ts): whether a machine proves its release.
 */
export class NodeAddresses {
  static readonly TTL_MS = 60_000;
  /**
   * A Node read before it reported any address (a kubelet that registered the Node and posts
   * its status a moment later) is read again this soon, not a minute on: its machine serves no
   * downloader until then.
   */
  static readonly NO_ADDRESS_TTL_MS = 5_000;
  private readonly core: CoreV1Api;
  private readonly known = new Map<
    string,
    { at: number; addresses: NodeAddress[]; boot: NodeBoot }
  >();
  private readonly reading = new Set<string>();
  /** When each Node was last asked for: one not asked for in two minutes is forgotten. */
  private readonly asked = new Map<string, number>();
  private readonly timer: NodeJS.Timeout;

  constructor(
    kc: KubeConfig,
    private readonly changed: () => void,
    private readonly onError: (e: unknown) => void,
  ) {
    this.core = kc.makeApiClient(CoreV1Api);
    // Without a pass in between (a fleet at rest), a Node's new address is still read.
    this.timer = setInterval(() => this.refresh(), NodeAddresses.NO_ADDRESS_TTL_MS);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  private refresh(now = Date.now()): void {
    for (const [name, at] of this.asked) {
      if (now - at > 2 * NodeAddresses.TTL_MS) {
        this.asked.delete(name);
        this.known.delete(name);
      } else if (this.stale(name, now)) this.read(name);
    }
  }

  /** Not read yet, or read longer ago than its kind of entry is trusted for. */
  private stale(name: string, now: number): boolean {
    const k = this.known.get(name);
    if (k === undefined) return true;
    const ttl = k.addresses.length === 0 ? NodeAddresses.NO_ADDRESS_TTL_MS : NodeAddresses.TTL_MS;
    return now - k.at > ttl;
  }

  /** What is known of these Nodes now; the stale and the unknown are read in the background. */
  of(nodes: Iterable<string>, now = Date.now()): ReadonlyMap<string, readonly NodeAddress[]> {
    const out = new Map<string, readonly NodeAddress[]>();
    for (const name of nodes) {
      const k = this.ask(name, now);
      if (k !== undefined) out.set(name, k.addresses);
    }
    return out;
  }

  /** Each Node's boot as last read (see `of`): a Node not read yet, or gone, is missing. */
  boots(nodes: Iterable<string>, now = Date.now()): NodeBoots {
    const out = new Map<string, NodeBoot>();
    for (const name of nodes) {
      const k = this.ask(name, now);
      if (k !== undefined) out.set(name, k.boot);
    }
    return out;
  }

  private ask(name: string, now: number): { addresses: NodeAddress[]; boot: NodeBoot } | undefined {
    this.asked.set(name, now);
    if (this.stale(name, now)) this.read(name);
    return this.known.get(name);
  }

  private read(name: string): void {
    if (this.reading.has(name)) return;
    this.reading.add(name);
    this.core
      .readNode({ name })
      .then(
        (n) => {
          const addresses = (n.status?.addresses ?? []).map((a) => ({
            type: a.type,
            address: a.address,
          }));
          const was = this.known.get(name);
          const at = Date.now();
          const boot = nodeBootOf(n, at);
          this.known.set(name, { at, addresses, boot });
          // A new address, or a Node that now proves (or no longer does): pass again.
          const same =
            JSON.stringify(addresses) === JSON.stringify(was?.addresses) &&
            boot.bootID === was?.boot.bootID &&
            boot.ready === was.boot.ready;
          if (!same) this.changed();
        },
        (e: unknown) => {
          this.known.delete(name);
          // A machine without a Node (no kubelet joined yet) is a state the evidence reports,
          // not an error to log every few seconds.
          if (!isNotFound(toApiError(e, { verb: "read", kind: "Node", name }))) this.onError(e);
        },
      )
      .finally(() => this.reading.delete(name));
  }
}
