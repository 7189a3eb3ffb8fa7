// The download child says each peer it dropped as one stderr line,
// `liken: peer-dropped {"peer":…,"fault":…,"detail":…,"artifact":…,"chunk":…}` (liken agent
// download --peer); the daemon reads those lines and reports each drop as a PeerDropped Event
// on its Machine and in its metrics (docs/peers.md, "A dropped peer").
import { PEER_FAULTS, type PeerDrop } from "../slots/peer-sources.js";

const PREFIX = "liken: peer-dropped ";
const FAULTS: ReadonlySet<string> = new Set(PEER_FAULTS);

/** The drop a child's stderr line says, or undefined for any other line (or a garbled one). */
export function parsePeerDropped(line: string): PeerDrop | undefined {
  if (!line.startsWith(PREFIX)) return undefined;
  let d: Partial<PeerDrop>;
  try {
    d = JSON.parse(line.slice(PREFIX.length)) as Partial<PeerDrop>;
  } catch {
    return undefined;
  }
  if (typeof d !== "object" || d === null) return undefined;
  if (typeof d.peer !== "string" || typeof d.detail !== "string") return undefined;
  if (typeof d.fault !== "string" || !FAULTS.has(d.fault)) return undefined;
  return {
    peer: d.peer,
    fault: d.fault,
    detail: d.detail,
    ...(typeof d.artifact === "string" ? { artifact: d.artifact } : {}),
    ...(Number.isSafeInteger(d.chunk) && d.chunk! >= 0 ? { chunk: d.chunk } : {}),
  };
}

/** Where the peer failed: a chunk of an artifact, an artifact's index, or (an older child) unsaid. */
function where(d: PeerDrop): string {
  if (d.artifact === undefined) return "";
  return d.chunk === undefined
    ? ` on the index of ${d.artifact}`
    : ` on chunk ${d.chunk} of ${d.artifact}`;
}

/** The Event's message: the peer, why, where, and what the agent did about it. */
export function peerDroppedMessage(version: string, d: PeerDrop): string {
  return `peer ${d.peer} dropped for ${version} (${d.fault}${where(d)}): ${d.detail}; its chunks are fetched from other peers or the channel`;
}
