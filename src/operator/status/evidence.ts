// What a Cluster showed of each release it took (status.evidence), pure: the record `liken
// promote` reads from the clusters of a ring (docs/rings.md). Written by the operator from what
// it already knows each tick: the machines running a release Ready (not Lost), the machines
// whose trial of it failed, the revocations its reverts left, the channel's recalls. A machine
// proves a release only on its Node's word too (../view/node-boot.ts): a Ready status from an
// agent whose kubelet never came up is not a release that works.
//
// Counts only grow (the most machines seen at once): machines that move on to a newer release
// proved the older one all the same, and a count that fell when they moved would make the ring's
// evidence shrink as it succeeds. Times are written when something changes, never each tick (a
// status field that changed each tick would make a status write each tick); the soak is read
// from them: (revertedAt or now) - firstProvenAt.
import {
  EVIDENCE_MAX_ITEMS,
  sameRelease,
  type Machine,
  type ReleaseEvidence,
  type ReleaseRef,
  type RevokedRelease,
} from "../../api/index.js";
import { rfc3339 } from "../../api/time.js";
import { CLUSTER_STATUS_BOUNDS, maxLengthOf, truncate } from "../../api/bounds.js";
import { compareVersions } from "../../release-decision/version-order.js";
import { nodeBootFault, type NodeBoots } from "../view/node-boot.js";

export interface EvidenceInput {
  /** status.evidence as recorded. */
  before: readonly ReleaseEvidence[] | undefined;
  machines: readonly Machine[];
  lost: ReadonlySet<string>;
  /** The Nodes of the machines that run a release Ready, by Node name, as last read. */
  nodes: NodeBoots;
  /** The fleet's target now: it gets an entry before any machine runs it. */
  target: ReleaseRef | undefined;
  revoked: readonly RevokedRelease[];
  recalls: readonly { version: string; digest?: string }[];
  now: Date;
}

/**
 * A machine runs `r` (version and digest: a status without a digest says nothing of which build
 * it runs) Ready, is not Lost, and its Node shows a kubelet running in a boot now.
 */
function proves(m: Machine, r: ReleaseRef, i: EvidenceInput): boolean {
  const s = m.status ?? {};
  return (
    s.version === r.version &&
    s.digest === r.digest &&
    s.step === "Ready" &&
    !i.lost.has(m.metadata.name) &&
    nodeBootFault(i.nodes.get(m.spec.nodeName), i.now.getTime(), m.status?.bootId) === undefined
  );
}

/**
 * The Nodes whose boot the evidence needs this pass: those of machines Ready on a release whose
 * entry could still grow (more such machines than it counts). Counts only grow, so a fleet at
 * rest, every entry at its most, reads no Node at all.
 */
export function provingNodes(
  machines: readonly Machine[],
  before: readonly ReleaseEvidence[] | undefined,
): Set<string> {
  const ready = new Map<string, Machine[]>();
  for (const m of machines) {
    const s = m.status ?? {};
    if (s.step !== "Ready" || s.version === undefined || s.digest === undefined) continue;
    const key = `${s.version} ${s.digest}`;
    const list = ready.get(key);
    if (list === undefined) ready.set(key, [m]);
    else list.push(m);
  }
  const out = new Set<string>();
  for (const [key, ms] of ready) {
    const e = before?.find((x) => `${x.version} ${x.digest}` === key);
    if (ms.length > (e?.provenMachines ?? 0)) for (const m of ms) out.add(m.spec.nodeName);
  }
  return out;
}

/**
 * Why machines that say they run `r` Ready (not Lost) do not count, for the EVIDENCE column: how
 * many, and the first one's Node fault ("1 Ready not counted (m-1: its Node carries no bootID
 * ...)"); undefined when every such machine counts. A person who sees "0 proven" beside machines
 * that are Ready learns there what is missing, not from the code.
 */
export function uncountedNote(i: EvidenceInput, r: ReleaseRef): string | undefined {
  const faults: [string, string][] = [];
  for (const m of i.machines) {
    const s = m.status ?? {};
    if (s.version !== r.version || s.digest !== r.digest || s.step !== "Ready") continue;
    if (i.lost.has(m.metadata.name)) continue;
    const why = nodeBootFault(i.nodes.get(m.spec.nodeName), i.now.getTime(), m.status?.bootId);
    if (why !== undefined) faults.push([m.metadata.name, why]);
  }
  const first = faults[0];
  return first === undefined
    ? undefined
    : `${faults.length} Ready not counted (${first[0]}: ${first[1]})`;
}

/** The machine's trial of `r` fell back (it refuses to retry it, or its last trial says so). */
function failed(m: Machine, r: ReleaseRef): boolean {
  const s = m.status ?? {};
  if ((s.failedReleases ?? []).some((f) => sameRelease(f, r))) return true;
  const t = s.lastTrial;
  return t !== undefined && t.result === "Failed" && sameRelease(t, r);
}

/** Every release the record is about: the recorded ones, the target, what machines run or failed. */
function releasesOf(i: EvidenceInput): ReleaseRef[] {
  const out: ReleaseRef[] = (i.before ?? []).map((e) => ({ version: e.version, digest: e.digest }));
  const add = (r: ReleaseRef | undefined): void => {
    if (r?.digest === undefined || r.version === undefined) return;
    if (!out.some((x) => sameRelease(x, r))) out.push({ version: r.version, digest: r.digest });
  };
  add(i.target);
  for (const m of i.machines) {
    const s = m.status ?? {};
    if (s.version !== undefined && s.digest !== undefined && s.step === "Ready")
      add({ version: s.version, digest: s.digest });
    for (const f of s.failedReleases ?? []) add(f);
    if (s.lastTrial?.result === "Failed") add(s.lastTrial);
  }
  return out;
}

function entryOf(i: EvidenceInput, r: ReleaseRef, at: string): ReleaseEvidence {
  const old = i.before?.find((e) => sameRelease(e, r));
  const proven = i.machines.filter((m) => proves(m, r, i)).length;
  const failures = i.machines.filter((m) => failed(m, r)).length;
  const was = { provenMachines: 0, failedTrials: 0, ...old };
  return {
    version: r.version,
    digest: r.digest,
    provenMachines: Math.max(was.provenMachines, proven),
    failedTrials: Math.max(was.failedTrials, failures),
    ...definedOnly(timesOf(i, r, old, proven, at)),
  };
}

/** The entry's times: each written once, when what it marks is first seen (lastProvenAt: on growth). */
function timesOf(
  i: EvidenceInput,
  r: ReleaseRef,
  old: ReleaseEvidence | undefined,
  proven: number,
  at: string,
): Record<"firstProvenAt" | "lastProvenAt" | "revertedAt" | "recalledAt", string | undefined> {
  const recalled = i.recalls.some(
    (x) => x.version === r.version && (x.digest === undefined || x.digest === r.digest),
  );
  const grew = proven > (old?.provenMachines ?? 0);
  return {
    firstProvenAt: old?.firstProvenAt ?? (proven > 0 ? at : undefined),
    lastProvenAt: grew ? at : old?.lastProvenAt,
    revertedAt: old?.revertedAt ?? i.revoked.find((x) => sameRelease(x, r))?.at,
    recalledAt: old?.recalledAt ?? (recalled ? at : undefined),
  };
}

/** The keys whose value is set (the status never carries an explicit undefined). */
function definedOnly<T extends Record<string, string | undefined>>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}

/** status.evidence after this tick: the recorded entries updated, new ones last, the oldest cut. */
export function evidenceOf(i: EvidenceInput): ReleaseEvidence[] {
  const at = rfc3339(i.now);
  return releasesOf(i)
    .map((r) => entryOf(i, r, at))
    .slice(-EVIDENCE_MAX_ITEMS);
}

/** How long `e` ran without a revert at `now`, in whole seconds (0 before any machine proved it). */
export function soakSecondsOf(e: ReleaseEvidence, now: Date): number {
  if (e.firstProvenAt === undefined) return 0;
  const end = e.revertedAt === undefined ? now.getTime() : Date.parse(e.revertedAt);
  return Math.max(0, Math.floor((end - Date.parse(e.firstProvenAt)) / 1000));
}

/** The newest entry by version (the order of the VERSION column). */
export function newestEvidence(es: readonly ReleaseEvidence[]): ReleaseEvidence | undefined {
  return [...es].sort((a, b) => compareVersions(a.version, b.version)).at(-1);
}

/**
 * The EVIDENCE column: "V: 3 proven, 0 failed since T", marked reverted or recalled, and `note`
 * (uncountedNote) after it.
 */
export function evidenceText(es: readonly ReleaseEvidence[], note?: string): string | undefined {
  const e = newestEvidence(es);
  if (e === undefined) return undefined;
  const since = e.firstProvenAt === undefined ? "" : ` since ${e.firstProvenAt}`;
  const marks = [
    ...(e.revertedAt === undefined ? [] : ["reverted"]),
    ...(e.recalledAt === undefined ? [] : ["recalled"]),
  ];
  const mark = marks.length === 0 ? "" : ` (${marks.join(", ")})`;
  const text = `${e.version}: ${e.provenMachines} proven, ${e.failedTrials} failed${since}${mark}`;
  // The note is the part that grows with a machine's name and its Node's fault: it is cut to
  // what the column holds, the counts never are.
  const room = maxLengthOf(CLUSTER_STATUS_BOUNDS, "evidenceText") - text.length - 2;
  return note === undefined || room < 16 ? text : `${text}; ${truncate(note, room)}`;
}
