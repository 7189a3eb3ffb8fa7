// One look at the API server and what it gave, and the Node's Ready condition: shared by the
// observer (./observe.ts) and the watched view (./view.ts), which imports nothing of the observer.
import { toApiError, type ApiError } from "../api/errors.js";

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

/** The Node's Ready condition, read from its object. */
export function readyOf(node: {
  status?: { conditions?: { type: string; status: string }[] };
}): boolean {
  return (node.status?.conditions ?? []).some((c) => c.type === "Ready" && c.status === "True");
}
