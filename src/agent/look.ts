// One look at the API server and what it gave, and what a Node's object says (its Ready
// condition, its boot): shared by the observer (./observe.ts) and the watched view
// (./view.ts), which imports nothing of the observer.
import { toApiError, type ApiError } from "../api/errors.js";
import type { NodeView } from "./api.js";
import type { NodeSeen } from "./rejoin.js";

/** The result of a look at the API: what it said, or why there is no answer. */
export type Look<T> = { ok: true; value: T } | { ok: false; error: ApiError };

/**
 * Runs one read against the API server. Whatever it throws (a 403, a 5xx, no answer, a bug's
 * TypeError) becomes a failed look that keeps its code and the cause's text, so the caller can
 * log it and never mistake it for an answer.
 */
export async function look<T>(
  what: { verb: string; kind: string; name?: string },
  read: () => Promise<T>,
): Promise<Look<T>> {
  try {
    return { ok: true, value: await read() };
  } catch (e) {
    return { ok: false, error: toApiError(e, what) };
  }
}

/**
 * The Node as the agent's watch keeps it: the fields NodeView declares, and of the conditions
 * only Ready. A kubelet's Node carries its images, addresses, capacity and managed fields (tens
 * of KiB), rewritten at every status update; the watch's copy lives as long as the agent.
 */
export function trimNode(node: NodeView): NodeView {
  const { name, resourceVersion, labels } = node.metadata;
  const ready = node.status?.conditions?.find((c) => c.type === "Ready");
  const bootID = node.status?.nodeInfo?.bootID;
  return {
    metadata: {
      name,
      ...(resourceVersion === undefined ? {} : { resourceVersion }),
      ...(labels === undefined ? {} : { labels }),
    },
    status: {
      ...(ready === undefined
        ? {}
        : {
            conditions: [
              {
                type: ready.type,
                status: ready.status,
                ...(ready.lastHeartbeatTime === undefined
                  ? {}
                  : { lastHeartbeatTime: ready.lastHeartbeatTime }),
              },
            ],
          }),
      ...(bootID === undefined ? {} : { nodeInfo: { bootID } }),
    },
  };
}

/** What names a boot in a Node (rejoin.ts): its bootID and its Ready condition's heartbeat. */
export function nodeSeenOf(node: NodeView): NodeSeen {
  const r = node.status?.conditions?.find((c) => c.type === "Ready");
  const at = r?.lastHeartbeatTime === undefined ? NaN : Date.parse(r.lastHeartbeatTime);
  return {
    bootId: node.status?.nodeInfo?.bootID ?? "",
    ...(r === undefined
      ? {}
      : { ready: { status: r.status, ...(Number.isNaN(at) ? {} : { heartbeatAt: at }) } }),
  };
}
