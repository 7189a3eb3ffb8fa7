// The release rules' mutants (mutants.ts), as seams at the boundary of the real operator: what
// a broken decider is shown (blindTo), and what the Cluster records all the same (recorded), so
// the invariant checker, which reads only the record, can see what the broken decision did.
//   recall-blind      follow.ts is shown the channel's releases without their recalls
//                     (world.ts's pick); the record keeps the channel's signed recalls;
//   taken-blind       the trust read (follow.ts's pick), decide() and the agents are shown the
//                     Cluster without status.trust.taken (the release a follower must never
//                     go below), as if a schema pruned it; the record keeps the newer;
//   revert-forgotten  decide() and the agents are shown the Cluster without status.revert (the
//                     revert in force).
import type { Cluster, ClusterStatus, ReleaseRef } from "../api/index.js";
import { compareVersions } from "../release-decision/version-order.js";
import type { SimChannel } from "./channel.js";
import type { Mutant } from "./mutants.js";

/** What the mutant's decider, trust read and agents are shown of the Cluster. */
export function blindTo(mutant: Mutant | undefined, c: Cluster): Cluster {
  const st = c.status;
  if (mutant === "taken-blind" && st?.trust?.taken !== undefined) {
    const { taken: _t, ...trust } = st.trust;
    return { ...c, status: { ...st, trust } };
  }
  if (mutant === "revert-forgotten" && st?.revert !== undefined) {
    const { revert: _r, ...status } = st;
    return { ...c, status };
  }
  return c;
}

const newer = (a: ReleaseRef | undefined, b: ReleaseRef | undefined): ReleaseRef | undefined =>
  a === undefined || b === undefined
    ? (a ?? b)
    : compareVersions(a.version, b.version) >= 0
      ? a
      : b;

/** The status the Cluster records after the mutant's decision (the real one's, unchanged). */
export function recorded(
  mutant: Mutant | undefined,
  made: ClusterStatus,
  before: Cluster,
  channel: SimChannel | undefined,
): ClusterStatus {
  const trust = made.trust;
  if (trust === undefined) return made;
  if (mutant === "taken-blind") {
    const taken = newer(before.status?.trust?.taken, trust.taken);
    return { ...made, trust: { ...trust, ...(taken === undefined ? {} : { taken }) } };
  }
  if (mutant === "recall-blind" && channel !== undefined) {
    const recalls = channel.releases.flatMap((r) =>
      r.recalled === undefined
        ? []
        : [{ version: r.version, digest: r.digest, reason: r.recalled.reason }],
    );
    return { ...made, trust: { ...trust, ...(recalls.length === 0 ? {} : { recalls }) } };
  }
  return made;
}
