// What an agent serves to its peers (docs/peers.md): a pure decider over the Cluster it reads
// and the slots it holds. Only a verified release (a slot Staged, Trial or Active) that the
// Cluster still vouches for (a catalog entry with the same digest, or the signed channel's
// target) is served: a withdrawn, bad or half-written slot never is, and a release the Cluster
// dropped stops being served on the next pass. The daemon starts, changes or stops the peer
// server to match, and writes the answer to Machine status.peers.
import { isIP } from "node:net";
import { channelTarget } from "../release-decision/view.js";
import {
  PEERS_DEFAULTS,
  type Cluster,
  type ReleaseRef,
  type SlotState,
  type SlotStatus,
} from "../api/types.js";
import type { ListenAddress } from "../metrics/serve.js";

/** The slot states whose bytes were verified against their release's digest chain. */
const VERIFIED: ReadonlySet<SlotState> = new Set<SlotState>(["Staged", "Trial", "Active"]);

export type ServePlan =
  /** Serve these releases at this address, at most this many bytes a second in all. */
  | { kind: "serve"; at: ListenAddress; releases: ReleaseRef[]; bytesPerSecond: number }
  /** Serve nothing: why (each is documented in docs/peers.md, "When a machine serves"). */
  | { kind: "off"; reason: "PeersDisabled" | "AddressOff" | "NothingToServe" };

function vouched(cluster: Cluster, r: ReleaseRef): boolean {
  const mode = cluster.spec.releases.trust?.mode ?? "pinned";
  const inCatalog =
    cluster.spec.releases.catalog?.some((e) => e.version === r.version && e.digest === r.digest) ??
    false;
  const t = channelTarget(cluster);
  const byChannel = t !== undefined && t.version === r.version && t.digest === r.digest;
  switch (mode) {
    case "pinned":
      return inCatalog;
    case "channel":
      return inCatalog || byChannel;
    case "channel+pinned":
      return inCatalog;
    default: {
      const never: never = mode;
      return never;
    }
  }
}

export function planServing(input: {
  cluster: Cluster;
  /** agent.yaml peersAddress; undefined: "off". */
  address: ListenAddress | undefined;
  slots: readonly SlotStatus[];
}): ServePlan {
  const peers = { ...PEERS_DEFAULTS, ...input.cluster.spec.peers };
  if (!peers.enabled) return { kind: "off", reason: "PeersDisabled" };
  if (input.address === undefined) return { kind: "off", reason: "AddressOff" };
  const releases: ReleaseRef[] = [];
  for (const s of input.slots) {
    if (!VERIFIED.has(s.state) || s.version === undefined || s.digest === undefined) continue;
    const r = { version: s.version, digest: s.digest };
    if (!vouched(input.cluster, r)) continue;
    if (!releases.some((x) => x.digest === r.digest)) releases.push(r);
  }
  if (releases.length === 0) return { kind: "off", reason: "NothingToServe" };
  return {
    kind: "serve",
    at: input.address,
    releases,
    bytesPerSecond: peers.maxUploadBytesPerSecond,
  };
}

/**
 * The peers cluster-operator assigned this machine for `release` (Cluster status.peerSources):
 * none when peers are off, when it has no assignment, or when the assignment names another
 * release (a stale one from the previous target). The download then uses the channel alone.
 */
export function assignedPeers(
  cluster: Cluster | undefined,
  machine: string,
  release: ReleaseRef,
  /** Told of each assigned peer refused (peerUrlRefusal), with why. */
  onRefused: (url: string, why: string) => void = () => {},
): string[] {
  if (cluster?.spec.peers?.enabled !== true) return [];
  const a = cluster.status?.peerSources?.find((x) => x.machine === machine);
  if (a === undefined || a.digest !== release.digest) return [];
  return a.peers.filter((url) => {
    const why = peerUrlRefusal(url);
    if (why !== undefined) onRefused(url, why);
    return why === undefined;
  });
}

/**
 * Why a downloader refuses to fetch from a peer URL, or undefined when it may. The operator
 * hands out only http://<a Node's IP address>:<port>/ (src/operator/peers/address.ts); anything
 * else in status.peerSources was not made by it (an older operator, or a hand edit) and could
 * aim this machine's requests anywhere: a name to resolve, a path, credentials, the link-local
 * range (a cloud's metadata service at 169.254.169.254) or an address of no host.
 */
/** Addresses no Node has: link-local (169.254/16, fe80::/10), unspecified, multicast. */
function noHostAddress(ip: string): boolean {
  const lower = ip.toLowerCase();
  if (isIP(ip) === 4)
    return ip.startsWith("169.254.") || ip === "0.0.0.0" || Number(ip.split(".")[0]) >= 224;
  return /^fe[89ab]/.test(lower) || lower === "::" || lower.startsWith("ff");
}

export function peerUrlRefusal(url: string): string | undefined {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return "not a URL";
  }
  if (u.protocol !== "http:") return `scheme ${u.protocol} (peers are http)`;
  if (u.port === "") return "no port (a peer is http://<Node address>:<peers port>/)";
  if (u.username !== "" || u.password !== "") return "credentials in the URL";
  if (u.pathname !== "/" || u.search !== "" || u.hash !== "") return "a path, query or fragment";
  const host = u.hostname.replace(/^\[(.*)\]$/, "$1");
  if (isIP(host) === 0) return `host ${host} is a name, not a Node's IP address`;
  if (noHostAddress(host))
    return `host ${host} is link-local, unspecified or multicast: no Node's address`;
  return undefined;
}
