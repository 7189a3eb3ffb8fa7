// Whether approving a Manual machine's reboot can do anything now, pure: shared by
// `liken approve-reboot` (which refuses an approval that cannot help, with the reason) and by
// the DETAIL of `liken status` (which must not say "waiting for: liken approve-reboot" when
// approving cannot help). Issue 42, items 1 and 2.
import type { Cluster, Machine, ReleaseRef } from "../../api/index.js";
import { effectiveTarget } from "../../release-decision/view.js";

export type Approvable =
  | { ok: true; staged: ReleaseRef }
  /** `why` says what is true and what to do instead; it completes "nothing approved: ...". */
  | { ok: false; code: ApprovalRefusal; why: string };

export type ApprovalRefusal =
  | "LIKEN_CLI_APPROVAL_AUTO"
  | "LIKEN_CLI_APPROVAL_NO_TARGET"
  | "LIKEN_CLI_APPROVAL_ON_TARGET"
  | "LIKEN_CLI_APPROVAL_NOT_STAGED"
  | "LIKEN_CLI_APPROVAL_NOT_TARGET"
  | "LIKEN_CLI_APPROVAL_HELD";

/** The reason a Cluster's rollout grants no turn whatever people approve, if it is held so. */
export function heldAgainstApproval(cluster: Cluster): string | undefined {
  const p = cluster.status?.conditions?.find((c) => c.type === "Progressing");
  if (p?.reason === "ReleaseFailed" || p?.reason === "ReleaseRevoked") return p.reason;
  return undefined;
}

export function approvable(cluster: Cluster, m: Machine): Approvable {
  const name = m.metadata.name;
  const c = cluster.metadata.name;
  if ((m.spec.rebootPolicy ?? "Manual") === "Auto") {
    return {
      ok: false,
      code: "LIKEN_CLI_APPROVAL_AUTO",
      why: `Machine ${name}'s rebootPolicy is Auto: it takes its reboot turn without an approval`,
    };
  }
  const target = effectiveTarget(cluster);
  if (target === undefined) {
    return {
      ok: false,
      code: "LIKEN_CLI_APPROVAL_NO_TARGET",
      why: `Cluster ${c} has no target release (spec.version unset, or its release revoked); set spec.version first`,
    };
  }
  if (m.status?.version === target.version) {
    return {
      ok: false,
      code: "LIKEN_CLI_APPROVAL_ON_TARGET",
      why: `Machine ${name} already runs the target ${target.version}; there is no reboot to approve`,
    };
  }
  const staged = m.status?.staged;
  if (staged === undefined) {
    const step = m.status?.step ?? "no status yet";
    const pct = m.status?.progress ? `, ${m.status.progress.percent}% downloaded` : "";
    return {
      ok: false,
      code: "LIKEN_CLI_APPROVAL_NOT_STAGED",
      why: `Machine ${name} has staged no release (step ${step}${pct}); approve it once it reports RebootPending, so the approval names the release it verified`,
    };
  }
  if (staged.version !== target.version || staged.digest !== target.digest) {
    return {
      ok: false,
      code: "LIKEN_CLI_APPROVAL_NOT_TARGET",
      why: `Machine ${name} staged ${staged.version}, but Cluster ${c}'s target is ${target.version}: nothing will boot ${staged.version}; approve once it staged ${target.version}`,
    };
  }
  const held = heldAgainstApproval(cluster);
  if (held !== undefined) {
    return {
      ok: false,
      code: "LIKEN_CLI_APPROVAL_HELD",
      why: `Cluster ${c}'s rollout of ${target.version} is held (${held}): no machine gets a turn for it, approved or not; see kubectl describe cluster ${c} for the way on`,
    };
  }
  return { ok: true, staged: { version: staged.version, digest: staged.digest } };
}
