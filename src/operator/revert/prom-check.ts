// spec.rollout.revert.prometheus, the I/O half: run the user's instant query against their
// Prometheus on its interval and count failures in a row, per Cluster and release. The pure
// half (whether the count trips a revert, and while the release is watched) is revert.ts.
// Counted in this copy's memory: a restart or a takeover starts the count again, which only
// ever delays a revert by failureLimit checks; it never starts one.
import {
  DEFAULT_PROMETHEUS_INTERVAL_SECONDS,
  type PrometheusCheck,
  type ReleaseRef,
} from "../../api/index.js";
import { errorText } from "../../errors.js";

/** What revert.ts reads of a release's checks. */
export interface QueryCheckView {
  /** Failed checks in a row (value above maxValue). */
  failures: number;
  /** The last check's outcome in words, for the condition and the Event. */
  last: string;
  /**
   * When each failed check of the current run began (the operator's wall clock, RFC 3339), the
   * newest last: a person's unrevoke forgives the ones before it (release/forgiven.ts).
   */
  failedAt?: string[];
}

export type QueryResult =
  | { kind: "value"; value: number }
  /** An empty result, an error, an unreachable server: neither a pass nor a failure. */
  | { kind: "none"; message: string };

/** A query answers within this or counts as no answer: a check runs every interval anyway. */
export const QUERY_TIMEOUT_MS = 10_000;

export async function runQuery(check: PrometheusCheck): Promise<QueryResult> {
  const url = new URL("api/v1/query", check.url.endsWith("/") ? check.url : `${check.url}/`);
  url.searchParams.set("query", check.query);
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(QUERY_TIMEOUT_MS) });
    const body = (await res.json()) as {
      status?: string;
      error?: string;
      data?: { resultType?: string; result?: unknown };
    };
    if (body.status !== "success") {
      return {
        kind: "none",
        message: `${url.origin} answered ${res.status}: ${body.error ?? "no error text"}`,
      };
    }
    return valueOf(body.data?.resultType, body.data?.result);
  } catch (e) {
    return { kind: "none", message: `${url.origin}: ${errorText(e)}` };
  }
}

/** The largest sample of an instant vector, or a scalar's value. */
export function valueOf(type: string | undefined, result: unknown): QueryResult {
  if (type === "scalar" && Array.isArray(result)) return number(result[1]);
  if (type === "vector" && Array.isArray(result)) {
    const values = result
      .map((s) => number((s as { value?: unknown[] }).value?.[1]))
      .flatMap((r) => (r.kind === "value" ? [r.value] : []));
    if (values.length === 0) return { kind: "none", message: "the query returned no sample" };
    return { kind: "value", value: Math.max(...values) };
  }
  return {
    kind: "none",
    message: `the query returned a ${type ?? "malformed"} result, not a vector or scalar`,
  };
}

function number(v: unknown): QueryResult {
  const n = typeof v === "string" ? Number(v) : NaN;
  return Number.isNaN(n)
    ? { kind: "none", message: `not a number: ${String(v)}` }
    : { kind: "value", value: n };
}

interface State extends QueryCheckView {
  lastAt: number;
  inFlight: boolean;
}

/** Checks per Cluster and release digest ("cluster/digest"). */
export class QueryChecks {
  private readonly states = new Map<string, State>();

  view(cluster: string): ReadonlyMap<string, QueryCheckView> {
    const out = new Map<string, QueryCheckView>();
    for (const [k, v] of this.states) {
      const [c, digest] = splitKey(k);
      if (c === cluster) {
        out.set(digest, { failures: v.failures, last: v.last, failedAt: [...(v.failedAt ?? [])] });
      }
    }
    return out;
  }

  forget(cluster: string): void {
    for (const k of [...this.states.keys()]) if (splitKey(k)[0] === cluster) this.states.delete(k);
  }

  /** Runs the check of `release` when its interval has passed; `done` after a result. */
  maybe(
    cluster: string,
    release: ReleaseRef,
    check: PrometheusCheck,
    nowMs: number,
    done: () => void,
    wallMs: number = Date.now(),
  ): void {
    const key = `${cluster}/${release.digest}`;
    const s = this.states.get(key) ?? {
      failures: 0,
      last: "not run yet",
      lastAt: -Infinity,
      inFlight: false,
    };
    this.states.set(key, s);
    const every = (check.intervalSeconds ?? DEFAULT_PROMETHEUS_INTERVAL_SECONDS) * 1000;
    if (s.inFlight || nowMs - s.lastAt < every) return;
    s.inFlight = true;
    s.lastAt = nowMs;
    void runQuery(check).then((r) => {
      s.inFlight = false;
      if (r.kind === "none") {
        s.last = `no verdict (${r.message})`;
      } else if (r.value > check.maxValue) {
        s.failures++;
        // Bounded: only the last failureLimit-many can matter, 64 covers any sane limit.
        s.failedAt = [...(s.failedAt ?? []), new Date(wallMs).toISOString()].slice(-64);
        s.last = `returned ${r.value} > maxValue ${check.maxValue}`;
      } else {
        s.failures = 0;
        s.failedAt = [];
        s.last = `returned ${r.value} <= maxValue ${check.maxValue}`;
      }
      done();
    });
  }
}

function splitKey(k: string): [string, string] {
  const i = k.lastIndexOf("/");
  return [k.slice(0, i), k.slice(i + 1)];
}
