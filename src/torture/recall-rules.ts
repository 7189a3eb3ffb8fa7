// The torture's rules about a signed recall (the `recall` fault), judged after the run on the
// watcher's history and the machines' records, pure. The bound is evidence, not a sleep: the
// recall was signed and served at `signedAt`; every operator copy reads the channel at least
// every channel interval, and a paused or killed leader is replaced within its lease, so by
// `signedAt + interval + slack` the operator must have shown it, and from the moment it showed
// it (or that bound, if it never did), no turn for the recalled release may be granted.
//   recall-not-shown          no Cluster read by the bound lists the recall (status.trust.recalls
//                             or status.trust.recalled): the operator did not act on it;
//   recalled-release-granted  a turn for the recalled release granted after the operator showed
//                             the recall, or after the bound (grantedAt has whole seconds, its
//                             floor: later than the instant means granted later);
//   recalled-release-rebooted an agent armed the recalled release's trial more than an agent's
//                             look after the instant, while it was not paused (a tick begun on the
//                             Cluster as it was before may still finish its read-back and arm).
// Written apart from src/release-decision/ on purpose, as the checker's release rules are: a rule that
// called the decision it checks would agree with it.
import type { Cluster } from "../api/index.js";
import type { Observation, Rel } from "../invariants/index.js";
import type { TortureViolation } from "./violation.js";

/** What the run did: the release recalled, when its recall was signed and served. */
export interface RecallMark {
  release: Rel;
  signedAt: number;
  /** signedAt plus the operator's channel interval plus RECALL_SLACK_MS. */
  boundAt: number;
}

/**
 * Beyond the channel interval: a leader paused holds its lease 15 s before the other copy
 * leads, a kube-apiserver or etcd restart drawn meanwhile lasts up to 5 s, and a pass and its
 * status write take a few seconds on two busy cores.
 */
export const RECALL_SLACK_MS = 30_000;
/** An agent's look: its loop (5 s) and a tick's read-back and arm under load. */
export const AGENT_LOOK_MS = 10_000;

/** A window during which an agent could not look (SIGSTOP of its group). */
export interface Stall {
  machine: string;
  from: number;
  to: number;
}

const same = (a: { version: string; digest?: string }, b: Rel): boolean =>
  a.version === b.version && (a.digest === undefined || a.digest === b.digest);

/** Whether the Cluster lists `r` as recalled (status.trust.recalls, or the recalled target). */
export function showsRecall(c: Cluster, r: Rel): boolean {
  const t = c.status?.trust;
  return [...(t?.recalls ?? []), ...(t?.recalled === undefined ? [] : [t.recalled])].some((x) =>
    same(x, r),
  );
}

/** When the watcher first read a Cluster listing the recall; undefined: never. */
export function recallShownAt(history: readonly Observation[], r: Rel): number | undefined {
  return history.find((h) => h.kind === "cluster" && showsRecall(h.cluster, r))?.at;
}

export function recallViolations(
  history: readonly Observation[],
  mark: RecallMark,
  stalls: readonly Stall[],
): TortureViolation[] {
  const shownAt = recallShownAt(history, mark.release);
  const since = Math.min(shownAt ?? mark.boundAt, mark.boundAt);
  return [
    ...notShown(mark, shownAt),
    ...grantedSince(history, mark, since),
    ...armedSince(history, mark, since, stalls),
  ];
}

const iso = (t: number): string => new Date(t).toISOString();

function notShown(mark: RecallMark, shownAt: number | undefined): TortureViolation[] {
  if (shownAt !== undefined && shownAt <= mark.boundAt) return [];
  const first = shownAt === undefined ? "; none ever did" : `; the first did at ${iso(shownAt)}`;
  return [
    {
      rule: "recall-not-shown",
      at: mark.boundAt,
      message: `${mark.release.version} was recalled in the signed channel at ${iso(mark.signedAt)} and no Cluster read by ${iso(mark.boundAt)} (the channel interval and ${RECALL_SLACK_MS / 1000} s later) lists it in status.trust.recalls${first}`,
    },
  ];
}

/** Turns for the recalled release granted after `since` (each once). */
function grantedSince(
  history: readonly Observation[],
  mark: RecallMark,
  since: number,
): TortureViolation[] {
  const r = mark.release;
  const out: TortureViolation[] = [];
  const granted = new Set<string>();
  for (const h of history) {
    if (h.kind !== "cluster") continue;
    for (const t of h.cluster.status?.rebootTurns ?? []) {
      const key = `${t.machine}\u0000${t.grantedAt}`;
      const late = Date.parse(t.grantedAt) > since;
      if (!late || !same({ version: t.version, digest: t.digest }, r) || granted.has(key)) continue;
      granted.add(key);
      out.push({
        rule: "recalled-release-granted",
        at: h.at,
        machine: t.machine,
        message: `a turn to ${r.version} for ${t.machine} granted at ${t.grantedAt}, after the recall of ${r.version} (signed at ${iso(mark.signedAt)}) was shown or due (${iso(since)})`,
      });
    }
  }
  return out;
}

/** Arms of the recalled release's trial an agent's look after `since`, by an agent not paused. */
function armedSince(
  history: readonly Observation[],
  mark: RecallMark,
  since: number,
  stalls: readonly Stall[],
): TortureViolation[] {
  const r = mark.release;
  return history.flatMap((h): TortureViolation[] => {
    if (h.kind !== "arm" || h.release.digest !== r.digest || h.at <= since + AGENT_LOOK_MS)
      return [];
    if (stalls.some((s) => s.machine === h.machine && s.from <= h.at && s.to >= since)) return [];
    return [
      {
        rule: "recalled-release-rebooted",
        at: h.at,
        machine: h.machine,
        message: `${h.machine} armed its trial of ${r.version} at ${iso(h.at)}, ${((h.at - since) / 1000).toFixed(1)} s after the recall was shown or due (${iso(since)}): a recall must not cost a machine a reboot`,
      },
    ];
  });
}
