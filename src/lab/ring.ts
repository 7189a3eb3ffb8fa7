// The rings of the rings scene (rings.ts): the three by name, each with its Cluster; one ring
// as the scene runs it (its API, its machines, the observer of its rollout); and what the
// scene reports of each from what its observer saw: when it ran the good release, and what it
// ran, in order.
import type { LikenApi } from "../api/client.js";
import { LAB_CLUSTER } from "./lab.js";
import type { RolloutObserver } from "./observer.js";

export const RING_NAMES = ["canary", "early", "stable"] as const;
export type RingName = (typeof RING_NAMES)[number];
/** The rings' Clusters: canary is the lab's own. */
export const RING_CLUSTERS: Readonly<Record<RingName, string>> = {
  canary: LAB_CLUSTER,
  early: "early",
  stable: "stable",
};

/** One ring as the scene runs it. */
export interface Ring {
  name: RingName;
  cluster: string;
  /** Where its Cluster is: "lab" (the lab's control plane) or LAB_RING_PLANE. */
  plane: string;
  api: LikenApi;
  machines: string[];
  observer: RolloutObserver;
}

/** What the scene measured, printed as one JSON line for the e2e test and people alike. */
export interface RingsFigures {
  good: string;
  bad: string;
  /** Per ring: when (s from the scene's start) the first and the last machine ran `good`. */
  rings: Record<
    RingName,
    { cluster: string; plane: string; machines: number; first?: number; all?: number }
  >;
  /** The refusal of the bad release by `liken promote`, its first line. */
  refused: string;
  /** Versions each ring's machines ran, in the order seen. */
  ran: Record<RingName, string[]>;
  seconds: number;
}

export function timesOf(
  r: Ring,
  version: string,
  started: number,
): RingsFigures["rings"][RingName] {
  const to = r.observer.changes.filter((c) => c.to === version);
  const s = (t: number): number => Math.round((t - started) / 100) / 10;
  const firsts = r.machines.map((m) => to.find((c) => c.machine === m)?.at);
  const seen = firsts.filter((t): t is number => t !== undefined);
  return {
    cluster: r.cluster,
    plane: r.plane,
    machines: r.machines.length,
    ...(seen.length === 0 ? {} : { first: s(Math.min(...seen)) }),
    ...(seen.length === r.machines.length ? { all: s(Math.max(...seen)) } : {}),
  };
}

/** The versions a ring's machines ran, in the order seen, from the factory one on. */
export function ranOf(r: Ring, from: string): string[] {
  const out = [from];
  for (const c of r.observer.changes) if (c.to !== undefined && !out.includes(c.to)) out.push(c.to);
  return out;
}

/** What each ring ran, and when: one line per machine change the observers saw. */
export function observerLines(rings: readonly Ring[], started: number): string {
  const lines = ["lab: what each ring ran, and when (seconds from the scene's start):"];
  for (const r of rings) {
    lines.push(
      `  ${r.name} (Cluster ${r.cluster} on control plane ${r.plane}, ${r.machines.length} machine(s)):`,
    );
    if (r.observer.changes.length === 0) lines.push("    no machine changed release");
    for (const c of r.observer.changes)
      lines.push(
        `    +${((c.at - started) / 1000).toFixed(1)} s ${c.machine}: ${c.from ?? "-"} -> ${c.to ?? "-"}`,
      );
  }
  return lines.join("\n");
}
