// The disruption budget: how many machines may be unavailable at once. The Cluster's
// spec.disruption.maxUnavailable is an integer (at least 1) or a percentage of the machines
// ("10%"), rounded up, and never less than one machine (the page: "the default is one
// machine at a time"). The CRD already refuses anything else; this parser still refuses
// it, because a budget of 0 or NaN must never be read as "no limit".
//
// A budget is also never more than the turns status.rebootTurns can hold (its maxItems): a
// write with one turn more is refused whole by the API server, and no turn (nor stall) would
// be recorded again. 100% of a fleet larger than that moves that many machines at a time.
import { maxItemsOf, CLUSTER_STATUS_BOUNDS } from "../../api/bounds.js";

/** The most reboot turns one Cluster records at once (the CRD's rebootTurns maxItems). */
export const MAX_TURNS = maxItemsOf(CLUSTER_STATUS_BOUNDS, "rebootTurns");

/** The page's default: one machine at a time. */
export const DEFAULT_MAX_UNAVAILABLE = 1;

export type BudgetParse =
  | { ok: true; budget: number; text: string }
  | { ok: false; budget: number; text: string; problem: string };

/**
 * The number of machines that may be unavailable at once, for `total` machines. On a value
 * the CRD should have refused, the answer is the safest budget (1) and a problem to report.
 */
export function parseBudget(value: number | string | undefined, total: number): BudgetParse {
  if (value === undefined) {
    return { ok: true, budget: DEFAULT_MAX_UNAVAILABLE, text: "1 (default)" };
  }
  if (typeof value === "number") {
    if (Number.isInteger(value) && value >= 1) return capped(value, `${value}`);
    return refuse(value, "an integer of at least 1");
  }
  const m = /^(100|[1-9][0-9]?)%$/.exec(value);
  if (m === null) {
    // "3" as a string: kubectl users write it; it is still an integer.
    if (/^[1-9][0-9]*$/.test(value)) return capped(Number(value), value);
    return refuse(value, 'an integer of at least 1 or a percentage from "1%" to "100%"');
  }
  const percent = Number(m[1]);
  const budget = Math.max(1, Math.ceil((percent * total) / 100));
  return capped(budget, `${value} of ${total} machines = ${budget}`);
}

function capped(budget: number, text: string): BudgetParse {
  if (budget <= MAX_TURNS) return { ok: true, budget, text };
  return {
    ok: true,
    budget: MAX_TURNS,
    text: `${text}, capped at ${MAX_TURNS} (the most turns status.rebootTurns holds)`,
  };
}

function refuse(value: number | string, want: string): BudgetParse {
  return {
    ok: false,
    budget: DEFAULT_MAX_UNAVAILABLE,
    text: "1 (fallback)",
    problem: `spec.disruption.maxUnavailable ${JSON.stringify(value)} is not ${want}; cluster-operator uses 1 until it is fixed`,
  };
}
