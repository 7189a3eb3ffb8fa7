// The Reverted condition: in force, held, refused or ended, with the reason a person reads.
import { type RevertRecord, type RevertReason } from "../../api/index.js";
import { type RevertCondition, type RevertInput } from "./input.js";

// ---------------------------------------------------------------------------------------
// The Reverted condition.

export function cond(
  status: RevertCondition["status"],
  reason: RevertReason,
  message: string,
): Omit<RevertCondition, "lastTransitionTime"> {
  return { type: "Reverted", status, reason, message };
}

export function inForceCondition(r: RevertRecord): Omit<RevertCondition, "lastTransitionTime"> {
  return cond(
    "True",
    recordReasonOf(r),
    `reverting ${r.from.version} to ${r.to.version} (decided at ${r.at} by ${r.by}): ${r.message}. ` +
      `${r.from.version} is revoked: nothing takes it again until a person clears it ` +
      `(\`liken rollout unrevoke CLUSTER ${r.from.version}\`). Set spec.version to ${r.to.version} ` +
      `(or a newer good release) to end the revert.`,
  );
}

/** The reason a record was decided with (records written before it was kept: by trigger). */
export function recordReasonOf(r: RevertRecord): RevertReason {
  return r.reason ?? (r.trigger === "Request" ? "RevertedByRequest" : "RevertedAutomatically");
}

/** A revert recorded but no longer in force: spec.version moved on. */
export function endedCondition(
  i: RevertInput,
  r: RevertRecord | undefined,
): Omit<RevertCondition, "lastTransitionTime"> | undefined {
  if (r === undefined) return undefined;
  const now = i.cluster.spec.version ?? "(none)";
  return cond(
    "False",
    "RevertSuperseded",
    `the revert of ${r.from.version} to ${r.to.version} (${r.at}) ended: spec.version names ${now} now, and that is the target`,
  );
}
