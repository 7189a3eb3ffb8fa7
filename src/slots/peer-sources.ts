// Peers as sources of a release's chunks (docs/peers.md): other machines of the cluster that
// hold the release verified and serve it read-only. A peer is only ever a faster channel: every
// chunk it sends is checked against the release's chunk index before the writer sees it, so a
// peer that lies, stalls or vanishes costs a retry from the next source, never a bad byte. A
// peer that failed once is dropped for the rest of this release (all its artifacts) and
// reported; the channel is always the last source.

/** Why a peer was dropped: a closed set, each documented in docs/peers.md. */
export const PEER_FAULTS = ["lied", "stalled", "slow", "unreachable", "refused"] as const;
export type PeerFault = (typeof PEER_FAULTS)[number];

export interface PeerDrop {
  peer: string;
  fault: PeerFault;
  /** What happened, naming the chunk or the HTTP reply. */
  detail: string;
  /** The artifact whose chunk (or index) the peer failed on. */
  artifact?: string;
  /**
   * The chunk (the index's number) the peer failed to deliver verified: the one it sent wrong
   * bytes for, stalled or broke off in, or refused. Absent when the peer failed on the
   * artifact's chunk index rather than on a chunk.
   */
  chunk?: number;
}

/** The channel's rate is judged from this many bytes on: a smaller sample is mostly latency. */
export const CHANNEL_SAMPLE_BYTES = 1024 * 1024;

/** The path under a peer's base URL where it serves one artifact of one release. */
export function peerArtifactPath(releaseDigest: string, artifact: string): string {
  const hex = releaseDigest.replace(/^sha256:/, "");
  return `v1/releases/${hex}/${encodeURIComponent(artifact)}`;
}

export class PeerSet {
  private readonly dropped = new Map<string, PeerDrop>();
  /** Bytes each peer sent that passed the index check. */
  readonly served = new Map<string, number>();

  constructor(
    private readonly peers: readonly string[],
    private readonly releaseDigest: string,
    private readonly onDrop?: (d: PeerDrop) => void,
  ) {}

  /** The peers not dropped, in the order given (the operator's order: same zone first). */
  live(): string[] {
    return this.peers.filter((p) => !this.dropped.has(p));
  }

  url(peer: string, artifact: string): URL {
    const base = peer.endsWith("/") ? peer : `${peer}/`;
    return new URL(peerArtifactPath(this.releaseDigest, artifact), base);
  }

  indexUrl(peer: string, artifact: string): URL {
    return new URL(`${this.url(peer, artifact).href}/index`);
  }

  drop(d: PeerDrop): void {
    if (this.dropped.has(d.peer)) return;
    this.dropped.set(d.peer, d);
    this.onDrop?.(d);
  }

  drops(): PeerDrop[] {
    return [...this.dropped.values()];
  }

  private channelBytes = 0;
  private channelMs = 0;

  /** A range the channel delivered: `bytes` in `ms` (what a slow peer is judged against). */
  noteChannel(bytes: number, ms: number): void {
    this.channelBytes += bytes;
    this.channelMs += ms;
  }

  /**
   * What the channel delivered so far in this download, bytes a second; undefined until it
   * sent enough to judge by (CHANNEL_SAMPLE_BYTES).
   */
  channelBps(): number | undefined {
    if (this.channelBytes < CHANNEL_SAMPLE_BYTES || this.channelMs <= 0) return undefined;
    return (this.channelBytes / this.channelMs) * 1000;
  }

  count(peer: string, bytes: number): void {
    this.served.set(peer, (this.served.get(peer) ?? 0) + bytes);
  }
}
