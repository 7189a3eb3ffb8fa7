// What `liken rollout revert CLUSTER` writes, pure: spec.rollout.revertRequest naming the
// release to leave, or a refusal that writes nothing and says why and what to do. The command
// (revert.ts) reads the Cluster and its Machines, asks this, and writes the request conditioned
// on the resourceVersion it read; cluster-operator decides the rest (src/operator/revert/).
// The refusals match what the operator would do with the request: a request it would drop is
// refused here, so no named action ends in silence (issue 48, defect 6).
import type { Cluster, KnownGood, Machine, ReleaseRef, RevertRequest } from "../../api/index.js";
import { specTarget, targetView } from "../../release-decision/view.js";
import { OperatorError } from "../../operator/errors.js";
import { REVERTIBLE, revertTargetOf } from "../../operator/revert/revert.js";
import { recalledRunning } from "../../operator/revert/running.js";

export interface Asked {
  by: string;
  reason?: string;
  at: string;
}

export interface RevertAsk {
  request: RevertRequest;
  from: ReleaseRef;
  to: KnownGood;
}

/** The request to write for a revert of `c` as read (with its Machines), or an OperatorError. */
export function revertRequestOf(c: Cluster, machines: readonly Machine[], asked: Asked): RevertAsk {
  const name = c.metadata.name;
  // Nothing chosen: a channel-mode Cluster that never took the recalled release its machines
  // run still reverts it (docs/revert.md); its Machines say which (running.ts).
  const from = specTarget(c) ?? recalledRunning(c, machines);
  if (from === undefined) {
    throw new OperatorError(
      "LIKEN_OPERATOR_USAGE",
      `Cluster ${name} chose no release (spec.version names no catalog entry, or the signed channel names no target) ` +
        `and none of its machines runs a release the channel recalled: nothing to revert. Nothing was written`,
    );
  }
  // Without a clock, as the operator decides a revert (revert.ts): a revert asked while the
  // trust expired is recorded and waits for it (docs/revert.md), so it is not refused here.
  const view = targetView(c);
  // A revert in force, also one that waits on a hold (RevertHeld): it is recorded already.
  const inForce =
    view.kind === "revert" ? view.revert : view.kind === "held" ? view.revert : undefined;
  if (inForce !== undefined) {
    throw new OperatorError(
      "LIKEN_OPERATOR_ALREADY_REVERTING",
      `Cluster ${name} already reverts ${from.version} to ${inForce.to.version} (since ${inForce.at}, by ${inForce.by}); watch with liken status ${name}`,
    );
  }
  notApplicable(c, view);
  const to = revertTargetOf(c, from);
  if (to === undefined) {
    throw new OperatorError(
      "LIKEN_OPERATOR_NO_KNOWN_GOOD",
      `Cluster ${name} knows no good release other than ${from.version} (status.lastKnownGood ${c.status?.lastKnownGood?.version ?? "unset"}): nothing to go back to. Set spec.version to a release you trust instead. Nothing was written`,
    );
  }
  const request: RevertRequest = {
    version: from.version,
    digest: from.digest,
    ...(asked.reason === undefined ? {} : { reason: asked.reason }),
    by: asked.by,
    at: asked.at,
  };
  return { request, from, to };
}

/**
 * Refuses a revert the operator would not act on: a release revoked already (no turn goes to
 * it), or held by a rule a revert does not lift. The hold's own message names what does.
 */
function notApplicable(c: Cluster, view: ReturnType<typeof targetView>): void {
  const name = c.metadata.name;
  if (view.kind === "revoked") {
    throw new OperatorError(
      "LIKEN_OPERATOR_REVERT_NOT_APPLICABLE",
      `${view.from.version} is revoked in Cluster ${name} already (${view.revoked.reason}, at ${view.revoked.at}): no turn is granted for it, so there is nothing to revert. ` +
        `Set spec.version to another release, or clear it with \`liken rollout unrevoke ${name} ${view.from.version}\`. Nothing was written`,
    );
  }
  if (view.kind !== "held" || REVERTIBLE.has(view.hold.rule)) return;
  throw new OperatorError(
    "LIKEN_OPERATOR_REVERT_NOT_APPLICABLE",
    `Cluster ${name} holds ${view.from.version} (${view.hold.rule}), and a revert does not lift that hold: ` +
      `${view.hold.message.replaceAll("CLUSTER", name).replace(/\.$/, "")}. Nothing was written`,
  );
}

/** What `liken rollout unrevoke CLUSTER VERSION` writes: spec.rollout.unrevoke, or a refusal. */
export function unrevokeRequestOf(c: Cluster, version: string, asked: Asked): RevertRequest {
  const entry = c.status?.revokedReleases?.find((x) => x.version === version);
  if (entry === undefined) {
    const list = (c.status?.revokedReleases ?? []).map((x) => x.version).join(", ") || "none";
    throw new OperatorError(
      "LIKEN_OPERATOR_NOT_REVOKED",
      `${version} is not revoked in Cluster ${c.metadata.name} (revoked: ${list}); nothing was written`,
    );
  }
  return {
    version: entry.version,
    digest: entry.digest,
    ...(asked.reason === undefined ? {} : { reason: asked.reason }),
    by: asked.by,
    at: asked.at,
  };
}
