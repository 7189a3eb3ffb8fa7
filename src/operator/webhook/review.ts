// The eviction check, as a pure function: may this caller evict this pod now? The API server
// asks it (through the webhook in server.ts) for every eviction a machine's agent requests;
// evictions by anyone else never reach it (the webhook's matchConditions).
//
// The rule, in the spirit of the kubelet's NodeRestriction: the agent of Machine <m>
// (user liken:machine:<m>) may evict a pod only when
//   - the pod runs on the Machine's own node (pod.spec.nodeName == Machine.spec.nodeName), and
//   - the Machine holds a granted reboot turn (its record in its Cluster's status.rebootTurns).
// Must never: allow when a fact is missing or unreadable. Every refusal names who asked, for
// which pod on which node, and why, because it is all a person sees in the drain's blocker.
import { AGENT_USER_PREFIX, type Cluster, type Machine } from "../../api/index.js";

export interface EvictionFacts {
  /** The requesting user, as the API server authenticated it. */
  username: string;
  /** "namespace/name" of the pod to evict. */
  pod: string;
  /** The pod's spec.nodeName, "" when unscheduled; undefined when the pod does not exist. */
  podNode: string | undefined;
  /** The caller's Machine, undefined when there is none. */
  machine: Machine | undefined;
  /** The Cluster the Machine names in spec.cluster, undefined when there is none. */
  cluster: Cluster | undefined;
}

/** Stable reasons, for logs and tests; the message is for people. */
export type RefusalReason =
  "NotAMachine" | "PodNotFound" | "NoMachine" | "OtherNode" | "NoCluster" | "NoTurn";

export type Verdict =
  | { allowed: true; message: string }
  | { allowed: false; reason: RefusalReason; code: 403 | 404; message: string };

/** The machine name in a user name liken:machine:<name>, or undefined. */
export function machineOf(username: string): string | undefined {
  if (!username.startsWith(AGENT_USER_PREFIX)) return undefined;
  const name = username.slice(AGENT_USER_PREFIX.length);
  return name === "" ? undefined : name;
}

function refuse(reason: RefusalReason, message: string, code: 403 | 404 = 403): Verdict {
  return { allowed: false, reason, code, message };
}

export function reviewEviction(f: EvictionFacts): Verdict {
  const who = f.username;
  const name = machineOf(who);
  if (name === undefined) {
    return refuse(
      "NotAMachine",
      `user ${who} is in group liken:machines but is not named liken:machine:<machine>; liken refuses its eviction of pod ${f.pod}`,
    );
  }
  if (f.podNode === undefined) {
    // 404, as the API server itself would answer: the drain reads it as "already gone".
    return refuse("PodNotFound", `pod ${f.pod} does not exist (eviction asked by ${who})`, 404);
  }
  const on = f.podNode === "" ? "no node (unscheduled)" : `node ${f.podNode}`;
  if (f.machine === undefined) {
    return refuse(
      "NoMachine",
      `${who} may not evict pod ${f.pod} on ${on}: there is no Machine ${name}, so liken knows no node and no reboot turn of it`,
    );
  }
  const own = f.machine.spec.nodeName;
  if (f.podNode !== own) {
    return refuse(
      "OtherNode",
      `${who} may evict only pods on its own node ${own}, not pod ${f.pod} on ${on}`,
    );
  }
  const clusterName = f.machine.spec.cluster;
  if (f.cluster === undefined) {
    return refuse(
      "NoCluster",
      `${who} may not evict pod ${f.pod} on node ${own}: its Cluster ${clusterName} does not exist, so it holds no reboot turn`,
    );
  }
  const turns = f.cluster.status?.rebootTurns ?? [];
  const turn = turns.find((t) => t.machine === name);
  if (turn === undefined) {
    const held = turns.length === 0 ? "none" : turns.map((t) => t.machine).join(", ");
    return refuse(
      "NoTurn",
      `${who} may not evict pod ${f.pod} on node ${own}: Machine ${name} holds no reboot turn in Cluster ${clusterName} (turns held: ${held}); a machine drains only on its granted turn`,
    );
  }
  return {
    allowed: true,
    message: `${who} evicts pod ${f.pod} on its node ${own} during its reboot turn (granted ${turn.grantedAt} by ${turn.grantedBy})`,
  };
}
