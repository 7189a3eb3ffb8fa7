// A status write the API server refused as Invalid (422): what the writer says, and how long it
// waits before it writes again. Shared by cluster-operator (Cluster status) and the agent
// (Machine status).
//
// Every field liken writes is bounded to the CRD it ships with (bounds.ts); a 422 then means the
// CRD installed in the cluster is another one (older, or edited), or a bug. The same write is
// refused again until the object, the status or the CRD changes, so retrying it every second
// only loads the API server and hides the cause in a log. Instead the writer records an Event
// and a StatusWriteRefused condition (written alone, on the object as the server has it, which
// the server accepted before) and backs off.
import type { ApiError } from "./errors.js";
import { truncate } from "./bounds.js";

/**
 * The first wait after a refusal: long enough not to load the server, short enough that a
 * person who applied the right CRD sees the next write succeed while still looking.
 */
export const REFUSAL_FIRST_BACKOFF_MS = 10_000;
/** The longest wait: a refused status holds the rollout, so it is tried every 5 minutes. */
export const REFUSAL_MAX_BACKOFF_MS = 5 * 60_000;
/** The condition's message, well under its 32768 bound: the server's words can be long. */
const MESSAGE_MAX = 4096;

export interface RefusalCondition {
  type: "StatusWriteRefused";
  status: "True";
  reason: "StatusInvalid";
  message: string;
}

/** What a person reads: what was refused, the fields and the server's words, what to do. */
export function refusalCondition(
  kind: "Cluster" | "Machine",
  name: string,
  e: ApiError,
  retryMs: number,
): RefusalCondition {
  const fields = e.causes
    .map((c) => [c.field, c.message].filter((x) => x).join(": "))
    .filter((x) => x !== "");
  const said = fields.length > 0 ? fields.join("; ") : (e.status?.message ?? e.message);
  const message =
    `the API server refused the status write of ${kind} ${name} (422 Invalid): ${truncate(said, 2048)}. ` +
    `The status stays as it was last written; liken writes it again in ${Math.round(retryMs / 1000)} s. ` +
    "This liken bounds every field to its own CRDs: compare the CRD installed " +
    `(kubectl get crd ${kind === "Cluster" ? "clusters" : "machines"}.liken.sh -o yaml) with ` +
    "config/crd/ of this liken version and apply this version's CRDs.";
  return {
    type: "StatusWriteRefused",
    status: "True",
    reason: "StatusInvalid",
    message: truncate(message, MESSAGE_MAX),
  };
}

interface Refusal {
  /** What the refused write was made from (a Cluster's generation, a status's JSON). */
  from: string;
  delayMs: number;
  until: number;
}

/**
 * Per object: after a refusal, no write of the same thing before the backoff ends; the wait
 * doubles on each refusal in a row, from REFUSAL_FIRST_BACKOFF_MS to REFUSAL_MAX_BACKOFF_MS.
 * A write made from something else (a person edited the spec, the agent has news) goes at once.
 */
export class RefusalBackoff {
  private readonly refusals = new Map<string, Refusal>();

  /** Records a refusal of a write made from `from`; returns how long to wait (ms). */
  refused(key: string, from: string, now: number): number {
    const before = this.refusals.get(key);
    const delayMs =
      before === undefined
        ? REFUSAL_FIRST_BACKOFF_MS
        : Math.min(before.delayMs * 2, REFUSAL_MAX_BACKOFF_MS);
    this.refusals.set(key, { from, delayMs, until: now + delayMs });
    return delayMs;
  }

  /** Whether a write made from `from` must wait (the same thing was refused, not long ago). */
  holds(key: string, from: string, now: number): boolean {
    const r = this.refusals.get(key);
    return r !== undefined && r.from === from && now < r.until;
  }

  /** Whether the last write of `key` was refused (and none accepted since). */
  has(key: string): boolean {
    return this.refusals.has(key);
  }

  /** A write was accepted: the next refusal starts from the first wait again. */
  clear(key: string): void {
    this.refusals.delete(key);
  }
}

/** The list without a StatusWriteRefused condition; the same array when it has none. */
export function withoutRefusal<C extends { type: string }>(list: C[] | undefined): C[] | undefined {
  if (list === undefined || !list.some((c) => c.type === "StatusWriteRefused")) return list;
  return list.filter((c) => c.type !== "StatusWriteRefused");
}

/** The list with `cond` in place of any StatusWriteRefused (its time kept while it holds). */
export function withRefusal<C extends { type: string; lastTransitionTime: string }>(
  list: readonly C[] | undefined,
  cond: RefusalCondition,
  now: string,
): C[] {
  const old = list?.find((c) => c.type === cond.type);
  const next = { ...cond, lastTransitionTime: old?.lastTransitionTime ?? now } as unknown as C;
  return [...(list ?? []).filter((c) => c.type !== cond.type), next];
}
