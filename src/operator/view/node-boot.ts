// What the operator knows of a machine's Node, pure: whether a kubelet runs on it now, in a boot
// of its own. A Machine's status is the agent's word; the Node is the kubelet's. A machine
// installed with a release and never tried (no trial, so no rejoin check on the agent's side,
// src/agent/rejoin.ts) says Ready with no kubelet at all, and a release whose kubelet never
// comes up must not count as proven on that word alone (status.evidence: a ring's promotion
// reads it). So a machine proves a release only when its Node (spec.nodeName) was read and:
//   - carries a bootID (status.nodeInfo.bootID): a kubelet posted it from a boot; a Node made by
//     hand, by `kubectl create`, or by a simulator shows none;
//   - is Ready True: the node lifecycle controller turns Ready Unknown about 40 s after the
//     kubelet's Lease stops being renewed, so True is the kubelet alive now;
//   - was read within NODE_BOOT_FRESH_MS (the read, not the Ready heartbeat: a kubelet rewrites
//     lastHeartbeatTime only every nodeStatusReportFrequency, 5 min, and kwok every 10-20 min,
//     so the heartbeat's age says nothing about a live Node).
import type { V1Node } from "@kubernetes/client-node";

/** The parts of a Node that say a kubelet runs on it, and when the operator read them. */
export interface NodeBoot {
  /** status.nodeInfo.bootID ("" when the Node carries none). */
  bootID: string;
  /** The Ready condition's status ("True", "False", "Unknown"), undefined when it has none. */
  ready: string | undefined;
  /** When the operator read the Node (wall clock ms). */
  readAt: number;
}

/** Each proving machine's Node by Node name; a Node not read (yet), or absent, is missing. */
export type NodeBoots = ReadonlyMap<string, NodeBoot>;

/**
 * How old a read may be and still prove: two of NodeAddresses' minute-long re-reads
 * (src/operator/peers/address.ts TTL_MS) and a pass's slack, so a Node read on schedule is
 * always fresh and one that cannot be read any more (deleted, 403) stops proving within it.
 */
export const NODE_BOOT_FRESH_MS = 150_000;

export function nodeBootOf(n: V1Node, readAt: number): NodeBoot {
  return {
    bootID: n.status?.nodeInfo?.bootID ?? "",
    ready: n.status?.conditions?.find((c) => c.type === "Ready")?.status,
    readAt,
  };
}

/**
 * Why the Node proves nothing now, or undefined when a kubelet runs on it in the machine's boot.
 * `machineBoot` is the boot the agent reports from (status.bootId; absent from an agent older
 * than the field): the Node must name that very boot, so a kubelet's status from before the
 * machine's last reboot proves nothing of the release it runs now.
 */
export function nodeBootFault(
  b: NodeBoot | undefined,
  now: number,
  machineBoot?: string,
): string | undefined {
  if (b === undefined) return "its Node was not read (it may not exist)";
  if (b.bootID === "") return "its Node carries no bootID (no kubelet posted its status)";
  if (machineBoot !== undefined && machineBoot !== b.bootID) {
    return `its Node shows boot ${b.bootID}, the machine runs boot ${machineBoot} (no kubelet posted this boot)`;
  }
  if (b.ready !== "True") return `its Node is not Ready (${b.ready ?? "no Ready condition"})`;
  if (now - b.readAt > NODE_BOOT_FRESH_MS) return "its Node was not read recently";
  return undefined;
}
