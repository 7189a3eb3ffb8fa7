// The size limits of every status field liken writes, and the helpers that keep a written
// status inside them. The numbers are the CRDs' own (config/crd/, the source of truth):
// test/unit/api-bounds.test.ts reads every maxLength and maxItems under `status` in both CRDs
// and fails unless these tables hold exactly the same paths and numbers.
//
// Why at all: the API server refuses (422 Invalid) a whole status write when one field is one
// character too long. The operator would then record no turn and no stall again, and an agent
// whose persisted trial message is too long would never report again. So a field is bounded
// where its text or list is made (truncate, joinBounded), and the writers pass the whole status
// through boundStatus() last, which cuts whatever a maker missed and says which field it cut.
//
// Lengths: the API server counts a string's Unicode code points (kube-openapi's
// validate.MaxLength uses utf8.RuneCountInString); a JavaScript string's length counts UTF-16
// units, never fewer, so a string bounded here by .length is never too long there.

export type Bound = { maxLength: number } | { maxItems: number };
export type Bounds = Readonly<Record<string, Bound>>;

const text = (maxLength: number): Bound => ({ maxLength });
const list = (maxItems: number): Bound => ({ maxItems });

/** metav1.Condition's limits, as both CRDs carry them (config/crd/*.yaml status.conditions). */
const CONDITION_BOUNDS = (prefix: string): Record<string, Bound> => ({
  [prefix]: list(16),
  [`${prefix}[].type`]: text(316),
  [`${prefix}[].reason`]: text(1024),
  [`${prefix}[].message`]: text(32768),
});

/** Cluster `status` paths ("a.b", "list[].field") and their limits. */
export const CLUSTER_STATUS_BOUNDS: Bounds = {
  machines: text(32),
  version: text(64),
  newest: text(64),
  available: text(64),
  availableText: text(400),
  leaders: list(32),
  "leaders[]": text(253),
  endpoint: text(2048),
  rebootTurns: list(1024),
  "rebootTurns[].machine": text(253),
  "rebootTurns[].grantedBy": text(253),
  "rebootTurns[].version": text(64),
  "rebootTurns[].digest": text(71),
  /** Copied from the Machine's status.lastTrial.at at the grant (decide.ts), a time stamp. */
  "rebootTurns[].priorTrialAt": text(64),
  /** Why a turn may not begin its drain (turns/paused.ts), bounded where it is made. */
  "rebootTurns[].drainPause.message": text(1024),
  takenBackTurns: list(1024),
  "takenBackTurns[].machine": text(253),
  "takenBackTurns[].version": text(64),
  "takenBackTurns[].digest": text(71),
  "takenBackTurns[].priorTrialAt": text(64),
  turns: text(4096),
  "canary.version": text(64),
  "canary.digest": text(71),
  "canary.machines": list(1000),
  "canary.machines[]": text(253),
  drainSkipped: list(1024),
  "drainSkipped[].machine": text(253),
  "drainSkipped[].pod": text(317),
  "drainSkipped[].podDisruptionBudget": text(317),
  display: text(64),
  peerSources: list(1024),
  "peerSources[].machine": text(253),
  "peerSources[].digest": text(71),
  "peerSources[].peers": list(4),
  "peerSources[].peers[]": text(2048),
  "channel.handledCheckReleases": text(1024),
  "lastKnownGood.version": text(64),
  "lastKnownGood.digest": text(71),
  "priorKnownGood.version": text(64),
  "priorKnownGood.digest": text(71),
  revokedReleases: list(64),
  "revokedReleases[].version": text(64),
  "revokedReleases[].digest": text(71),
  "revokedReleases[].reason": text(64),
  "revokedReleases[].message": text(4096),
  "revert.from.version": text(64),
  "revert.from.digest": text(71),
  "revert.to.version": text(64),
  "revert.to.digest": text(71),
  "revert.message": text(4096),
  "revert.by": text(253),
  "revert.gate": text(128),
  evidence: list(16),
  "evidence[].version": text(64),
  "evidence[].digest": text(71),
  evidenceText: text(256),
  "trust.evidence.from": text(63),
  "trust.rootDigest": text(71),
  "trust.target.version": text(64),
  "trust.target.digest": text(71),
  "trust.taken.version": text(64),
  "trust.taken.digest": text(71),
  "trust.newest.version": text(64),
  "trust.newest.digest": text(71),
  "trust.recalled.version": text(64),
  "trust.recalled.reason": text(1024),
  "trust.recalls": list(16),
  "trust.recalls[].version": text(64),
  "trust.recalls[].digest": text(71),
  "trust.recalls[].reason": text(1024),
  "trust.expiresRole": text(16),
  "trust.freshness": text(128),
  /** TUF metadata files (docs/adr/channel-trust-in-status.md says why they live here). */
  "trust.metadata.root": text(65536),
  "trust.metadata.timestamp": text(8192),
  "trust.metadata.snapshot": text(8192),
  "trust.metadata.targets": text(262144),
  ...CONDITION_BOUNDS("conditions"),
};

/** Machine `status` paths and their limits. */
export const MACHINE_STATUS_BOUNDS: Bounds = {
  version: text(64),
  digest: text(71),
  "target.version": text(64),
  "target.digest": text(71),
  slots: list(2),
  "slots[].version": text(64),
  "slots[].digest": text(71),
  "staged.version": text(64),
  "staged.digest": text(71),
  "progress.artifact": text(253),
  "turnRequest.version": text(64),
  "turnRequest.digest": text(71),
  "lastTrial.version": text(64),
  "lastTrial.digest": text(71),
  "lastTrial.reason": text(128),
  "lastTrial.message": text(4096),
  failedReleases: list(16),
  "failedReleases[].version": text(64),
  "failedReleases[].digest": text(71),
  "failedReleases[].reason": text(128),
  "postPromotionHealth.version": text(64),
  "postPromotionHealth.digest": text(71),
  "postPromotionHealth.bootID": text(64),
  "postPromotionHealth.gate": text(128),
  "postPromotionHealth.message": text(4096),
  bootId: text(64),
  blockingPods: list(8),
  "blockingPods[]": text(317),
  "drainBlocker.pod": text(317),
  "drainBlocker.podDisruptionBudget": text(317),
  "drainBlocker.message": text(4096),
  "drainTimedOut.version": text(64),
  "drainTimedOut.digest": text(71),
  "drainTimedOut.pod": text(317),
  "drainTimedOut.podDisruptionBudget": text(317),
  "drainTimedOut.message": text(4096),
  "peers.url": text(2048),
  "peers.releases": list(2),
  "peers.releases[].version": text(64),
  "peers.releases[].digest": text(71),
  certificateExpiry: text(64),
  certificateKeyDigest: text(71),
  "registration.at": text(64),
  ...CONDITION_BOUNDS("conditions"),
};

/**
 * Spec fields a person's command writes (`liken rollout resume`): checked before the write, so
 * the person reads which flag is too long instead of the server's 422.
 */
export const MACHINE_SPEC_BOUNDS: Bounds = {
  "resume.by": text(253),
  "resume.reason": text(1024),
};

/** The maxLength of a path in a table (throws for a path the table does not bound: a bug). */
export function maxLengthOf(bounds: Bounds, path: string): number {
  const b = bounds[path];
  if (b === undefined || !("maxLength" in b)) throw new Error(`no maxLength for status.${path}`);
  return b.maxLength;
}

/** The maxItems of a path in a table (throws for a path the table does not bound: a bug). */
export function maxItemsOf(bounds: Bounds, path: string): number {
  const b = bounds[path];
  if (b === undefined || !("maxItems" in b)) throw new Error(`no maxItems for status.${path}`);
  return b.maxItems;
}

const ELLIPSIS = "…";

/** Keeps `keep` UTF-16 units of `s`, one fewer when the cut would split a surrogate pair. */
function head(s: string, keep: number): string {
  const code = s.charCodeAt(keep - 1);
  return s.slice(0, code >= 0xd800 && code <= 0xdbff ? keep - 1 : keep);
}

/**
 * `s` when it fits in `max`; otherwise its beginning and "… and N more characters", `max` long
 * at most (just "…" at the end when even that tail would not fit).
 */
export function truncate(s: string, max: number): string {
  if (s.length <= max) return s;
  // N is at most s.length: a tail sized for it is never too short for the real N.
  const room = max - `${ELLIPSIS} and ${s.length} more characters`.length;
  if (room < 1) return head(s, max - 1) + ELLIPSIS;
  const kept = head(s, room);
  return `${kept}${ELLIPSIS} and ${s.length - kept.length} more characters`;
}

/**
 * The items joined by `sep` when that fits in `max`; otherwise as many leading items as fit,
 * then "… and N more" (N the items left out), `max` long at most.
 */
export function joinBounded(items: readonly string[], sep: string, max: number): string {
  const all = items.join(sep);
  if (all.length <= max) return all;
  const tail = (n: number): string => `${ELLIPSIS} and ${n} more`;
  let out = "";
  let shown = 0;
  for (const item of items) {
    const next = shown === 0 ? item : `${out}${sep}${item}`;
    // The last item never gets here with room: all of them together did not fit.
    if (`${next}${sep}${tail(items.length - shown - 1)}`.length > max) break;
    out = next;
    shown++;
  }
  const rest = tail(items.length - shown);
  const bounded = shown === 0 ? rest : `${out}${sep}${rest}`;
  return bounded.length <= max ? bounded : truncate(bounded, max);
}

/** A status within its bounds, and the paths that had to be cut to get there. */
export interface BoundedStatus<T> {
  status: T;
  cut: string[];
}

/**
 * The status with every string and list of `bounds` cut to its limit (strings by truncate(),
 * lists keeping their first items). The makers bound their fields already; what this cuts is
 * a maker's miss, and `cut` names it so the writer can say so.
 */
export function boundStatus<T>(bounds: Bounds, status: T): BoundedStatus<T> {
  const cut: string[] = [];
  const walk = (v: unknown, path: string): unknown => {
    const b = path === "" ? undefined : bounds[path];
    if (typeof v === "string") {
      if (b === undefined || !("maxLength" in b) || v.length <= b.maxLength) return v;
      cut.push(path);
      return truncate(v, b.maxLength);
    }
    if (Array.isArray(v)) {
      let items: unknown[] = v;
      if (b !== undefined && "maxItems" in b && v.length > b.maxItems) {
        cut.push(path);
        items = v.slice(0, b.maxItems);
      }
      return items.map((x) => walk(x, `${path}[]`));
    }
    if (v !== null && typeof v === "object") {
      return Object.fromEntries(
        Object.entries(v as Record<string, unknown>).map(([k, x]) => [
          k,
          walk(x, path === "" ? k : `${path}.${k}`),
        ]),
      );
    }
    return v;
  };
  return { status: walk(status, "") as T, cut };
}
