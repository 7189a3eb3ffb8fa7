// The release rules of the invariant checker (issue 38), judged on each Cluster as observed:
//   grant-withdrawn   a turn record that first appears for a release the same Cluster lists as
//                     recalled by its channel (status.trust.recalls) or revoked
//                     (status.revokedReleases), or granted after the channel's trust expired
//                     (status.trust.expiresAt plus acceptExpiredSeconds) while ChannelReachable
//                     was False;
//   below-taken       a turn record that first appears, in a Cluster that follows its channel,
//                     for a release older than the one it took (status.trust.taken), other than
//                     the target of a revert in force (a revert is a person's or their
//                     policy's say);
//   revert-dropped    a revert recorded (status.revert) disappears while the Cluster still
//                     chooses the release it leaves (spec.version, or the followed release
//                     taken) and no person unrevoked that release since the revert began.
// Written apart from src/release-decision/ on purpose: a checker that called the decision it
// checks would agree with it, bugs included.
import type { Cluster, RebootTurn } from "../api/index.js";
import { compareVersions } from "../release-decision/version-order.js";
import type { Violation } from "./history.js";

const same = (a: { version: string; digest?: string }, b: { version: string; digest?: string }) =>
  a.version === b.version &&
  (a.digest === undefined || b.digest === undefined || a.digest === b.digest);

function listed(c: Cluster, r: { version: string; digest?: string }): string | undefined {
  if ((c.status?.trust?.recalls ?? []).some((x) => same(x, r))) return "recalled by the channel";
  if ((c.status?.revokedReleases ?? []).some((x) => same(x, r))) return "revoked by the Cluster";
  return undefined;
}

function expiredUnreachable(c: Cluster, t: RebootTurn): string | undefined {
  const expiresAt = c.status?.trust?.expiresAt;
  const reach = c.status?.conditions?.find((x) => x.type === "ChannelReachable");
  if (expiresAt === undefined || reach?.status !== "False") return undefined;
  const accept = (c.spec.releases.trust?.acceptExpiredSeconds ?? 0) * 1000;
  if (Date.parse(t.grantedAt) <= Date.parse(expiresAt) + accept) return undefined;
  return `granted at ${t.grantedAt}, after the channel's trust expired (${expiresAt}) while it was unreachable`;
}

function withdrawn(c: Cluster, t: RebootTurn): string | undefined {
  return listed(c, { version: t.version, digest: t.digest }) ?? expiredUnreachable(c, t);
}

function belowTaken(c: Cluster, t: RebootTurn): string | undefined {
  const taken = c.status?.trust?.taken;
  if (c.spec.releases.trust?.follow === undefined || taken === undefined) return undefined;
  if (compareVersions(t.version, taken.version) >= 0) return undefined;
  const revert = c.status?.revert;
  if (revert !== undefined && same(revert.to, { version: t.version, digest: t.digest })) {
    return undefined;
  }
  return `below ${taken.version}, the release this follower took, with no revert to it`;
}

/** The release the Cluster chooses, as the spec or the trust status says. */
function chooses(c: Cluster, r: { version: string; digest: string }): boolean {
  if (c.spec.releases.trust?.follow !== undefined) {
    const t = c.status?.trust;
    return [t?.target, t?.taken].some((x) => x !== undefined && same(x, r));
  }
  return c.spec.version === r.version;
}

function dropped(prev: Cluster | undefined, next: Cluster): string | undefined {
  const r = prev?.status?.revert;
  if (r === undefined) return undefined;
  const now = next.status?.revert;
  if (now !== undefined && same(now.from, r.from)) return undefined;
  if (!chooses(next, r.from)) return undefined;
  const u = next.spec.rollout?.unrevoke;
  if (u !== undefined && same(u, r.from) && Date.parse(u.at) >= Date.parse(r.at)) return undefined;
  return `the revert of ${r.from.version} to ${r.to.version} (${r.at}) was dropped while the Cluster still chooses ${r.from.version}, and nobody unrevoked it`;
}

/** The violations of the release rules in the Cluster `next`, observed at `at`. */
export function releaseViolations(
  prev: Cluster | undefined,
  next: Cluster,
  added: readonly RebootTurn[],
  at: number,
): Violation[] {
  const out: Violation[] = [];
  for (const t of added) {
    const w = withdrawn(next, t);
    if (w !== undefined) {
      out.push({
        rule: "grant-withdrawn",
        at,
        machine: t.machine,
        message: `a turn to ${t.version} for ${t.machine}: ${w}`,
      });
    }
    const b = belowTaken(next, t);
    if (b !== undefined) {
      out.push({
        rule: "below-taken",
        at,
        machine: t.machine,
        message: `a turn to ${t.version} for ${t.machine}: ${b}`,
      });
    }
  }
  const d = dropped(prev, next);
  if (d !== undefined) out.push({ rule: "revert-dropped", at, message: d });
  return out;
}
