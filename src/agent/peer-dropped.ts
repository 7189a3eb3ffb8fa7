// The download child says each peer it dropped as one stderr line,
// `liken: peer-dropped {"peer":…,"fault":…,"detail":…}` (liken agent download --peer); the
// daemon reads those lines and reports each drop as a PeerDropped Event on its Machine
// (docs/peers.md, "A dropped peer").
import type { PeerDrop, PeerFault } from "../slots/peer-sources.js";

const PREFIX = "liken: peer-dropped ";
const FAULTS: ReadonlySet<string> = new Set<PeerFault>([
  "lied",
  "stalled",
  "unreachable",
  "refused",
]);

/** The drop a child's stderr line says, or undefined for any other line (or a garbled one). */
export function parsePeerDropped(line: string): PeerDrop | undefined {
  if (!line.startsWith(PREFIX)) return undefined;
  try {
    const d = JSON.parse(line.slice(PREFIX.length)) as Partial<PeerDrop>;
    if (typeof d.peer !== "string" || typeof d.detail !== "string") return undefined;
    if (typeof d.fault !== "string" || !FAULTS.has(d.fault)) return undefined;
    return { peer: d.peer, fault: d.fault, detail: d.detail };
  } catch {
    return undefined;
  }
}

/** The Event's message: the peer, why, and what the agent did about it. */
export function peerDroppedMessage(version: string, d: PeerDrop): string {
  return `peer ${d.peer} dropped for ${version} (${d.fault}): ${d.detail}; its chunks are fetched from other peers or the channel`;
}
