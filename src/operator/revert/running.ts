// The release a revert leaves when the Cluster chose none: what its Machines run (issue 48,
// defect 7). A channel-mode Cluster whose trust status began after the channel recalled a
// release (a recreated status, a new root pin, a switch from pinned mode) never took it, so the
// release decision has nothing chosen (`none`); its machines still run the recalled release, and
// docs/revert.md promises that a revert still works on a recalled release. The Machines say
// what they run, so the revert's `from` comes from them. Pure; the operator (revert.ts) and
// `liken rollout revert` (the request it writes) read the same answer.
import type { Cluster, Machine, ReleaseRef } from "../../api/index.js";
import { chosenOf, releaseInputOf } from "../../release-decision/input.js";
import { compareVersions } from "../../release-decision/version-order.js";
import type { Recall } from "../../release-decision/decide.js";

/**
 * The newest release a Machine of `c` runs that the signed channel recalled, when `c` is in a
 * channel mode and chose nothing (no target, nothing taken); with spec.version (no follow),
 * only the release it names. Its digest is the recall's, else the Machine's: a recall that names
 * a digest matches only Machines that report that digest or none. Undefined: no such release,
 * and nothing to revert.
 */
export function recalledRunning(c: Cluster, machines: readonly Machine[]): ReleaseRef | undefined {
  const spec = c.spec.releases.trust;
  // Pinned mode reads no channel, so it knows no recall; a choice made is what a revert leaves.
  if (spec === undefined || spec.mode === "pinned" || chosenOf(c) !== undefined) return undefined;
  // A trust status made from another root than the spec's counts for nothing (view.ts).
  if (c.status?.trust?.rootDigest !== spec.rootDigest) return undefined;
  const recalls = releaseInputOf(c).recalls;
  const named = (v: string): boolean => spec.follow !== undefined || v === c.spec.version;
  let newest: ReleaseRef | undefined;
  for (const m of machines) {
    const r = recalledOf(recalls, m);
    if (r === undefined || !named(r.version)) continue;
    if (newest === undefined || compareVersions(r.version, newest.version) > 0) newest = r;
  }
  return newest;
}

/**
 * The release `m` runs, when the channel recalled it, with the recall's digest (else its own).
 * status.trust.recalled names a version only; where status.trust.recalls names that version's
 * digest, only that build is the one recalled.
 */
function recalledOf(recalls: readonly Recall[], m: Machine): ReleaseRef | undefined {
  const version = m.status?.version;
  const mine = m.status?.digest;
  if (version === undefined) return undefined;
  const named = recalls.filter((r) => r.version === version);
  const built = named.filter((r) => r.digest !== undefined);
  const recall = (built.length > 0 ? built : named).find(
    (r) => r.digest === undefined || mine === undefined || r.digest === mine,
  );
  const digest = recall?.digest ?? mine;
  return recall === undefined || digest === undefined ? undefined : { version, digest };
}
