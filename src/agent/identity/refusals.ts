// When a client certificate that is still valid has stopped being accepted: the API server
// answers 401 to the agent's own requests (the cluster's client CA rotated, the certificate was
// revoked). Only the bootstrap credential can help then, as on expiry (identity.ts). Pure: the
// answers' HTTP statuses in, "rejoin now" out (table: test/unit/agent-identity-refusals.test.ts).
//
// Bounded both ways: one 401 is not enough (a request raced a renewal's switch, an API server
// starting up), so it takes REJOIN_AFTER_401S answers in a row, all 401, spread over at least
// REJOIN_AFTER_MS, with no accepted answer between; and rejoins for 401s are at least
// REJOIN_MIN_INTERVAL_MS apart, doubling to REJOIN_MAX_INTERVAL_MS while no answer is accepted
// (a bootstrap credential whose certificates the API server refuses too must not file a
// request a minute for ever).

export const REJOIN_AFTER_401S = 3;
export const REJOIN_AFTER_MS = 10_000;
export const REJOIN_MIN_INTERVAL_MS = 60_000;
export const REJOIN_MAX_INTERVAL_MS = 15 * 60_000;

export interface RefusalState {
  /** 401s in a row since the last accepted answer. */
  count: number;
  /** When the first of them came. */
  sinceMs: number | undefined;
  /** No rejoin for 401s before this (the last one's time plus the interval). */
  nextMs: number;
  /** The interval after the next rejoin. */
  intervalMs: number;
}

export const NO_REFUSALS: RefusalState = {
  count: 0,
  sinceMs: undefined,
  nextMs: 0,
  intervalMs: REJOIN_MIN_INTERVAL_MS,
};

/**
 * The state after an answer with HTTP status `status`. 401: one more refusal. Any other answer
 * below 500 came from a server that authenticated the request (403 and 404 included): the
 * certificate is accepted. A 5xx or no answer says nothing of the certificate.
 */
export function noteAnswer(s: RefusalState, status: number, nowMs: number): RefusalState {
  if (status === 401) {
    return { ...s, count: s.count + 1, sinceMs: s.sinceMs ?? nowMs };
  }
  if (status >= 200 && status < 500) {
    return { ...s, count: 0, sinceMs: undefined, intervalMs: REJOIN_MIN_INTERVAL_MS };
  }
  return s;
}

/** Whether the agent joins again with the bootstrap credential now. */
export function rejoinDue(s: RefusalState, nowMs: number): boolean {
  return (
    s.count >= REJOIN_AFTER_401S &&
    s.sinceMs !== undefined &&
    nowMs - s.sinceMs >= REJOIN_AFTER_MS &&
    nowMs >= s.nextMs
  );
}

/** The state once a rejoin for 401s began at `nowMs`. */
export function rejoined(s: RefusalState, nowMs: number): RefusalState {
  return {
    count: 0,
    sinceMs: undefined,
    nextMs: nowMs + s.intervalMs,
    intervalMs: Math.min(REJOIN_MAX_INTERVAL_MS, s.intervalMs * 2),
  };
}
