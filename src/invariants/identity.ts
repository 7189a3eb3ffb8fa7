// The identity rule of the invariant checker (issue 38):
//   lost-lapsed   a machine read Lost whose certificate lapsed (its renewal left pending until
//                 it expired: approval off, the operator down) and that could have joined again
//                 for longer than LAPSE_BOUND_MS: powered, its agent running, its network up
//                 and an approver running, yet it still holds no certificate. A machine that
//                 cannot rejoin (no approver, cut off) may read Lost; one that can must come
//                 back by itself, not wait for a person to restart its agent.
// Evidence: the observer sees the lapse (the agent's log, the API server's 401s), the rejoin
// (the new certificate, IdentityCurrent Rejoined), and when a join was possible.
import type { Machine } from "../api/index.js";
import type { Violation } from "./history.js";

/** How long a machine that can rejoin may take to: a bootstrap join and its approval. */
export const LAPSE_BOUND_MS = 30_000;

interface Lapse {
  since: number;
  /** Since when it could join again; undefined: it cannot now. */
  possibleSince: number | undefined;
  said: boolean;
}

export class LapseRule {
  private readonly lapses = new Map<string, Lapse>();

  lapsed(machine: string, at: number): void {
    this.lapses.set(machine, { since: at, possibleSince: undefined, said: false });
  }

  rejoined(machine: string): void {
    this.lapses.delete(machine);
  }

  possible(machine: string, at: number, possible: boolean): void {
    const l = this.lapses.get(machine);
    if (l === undefined) return;
    if (!possible) l.possibleSince = undefined;
    else l.possibleSince ??= at;
  }

  /** A violation when `m`, read at `at`, is Lost only because its certificate lapsed. */
  judge(m: Machine | undefined, at: number): Violation[] {
    if (m?.status?.step !== "Lost") return [];
    const name = m.metadata.name;
    const l = this.lapses.get(name);
    if (l === undefined || l.said || l.possibleSince === undefined) return [];
    const could = at - Math.max(l.since, l.possibleSince);
    if (could <= LAPSE_BOUND_MS) return [];
    l.said = true;
    return [
      {
        rule: "lost-lapsed",
        at,
        machine: name,
        message: `${name} reads Lost: its certificate lapsed at ${l.since} ms and it could have joined again with the bootstrap credential for ${Math.round(could / 1000)} s (powered, agent and network up, an approver running), but holds no certificate`,
      },
    ];
  }
}
