// The torture's floor rule for the automatic revert (the `bad-release` fault with the Cluster's
// revert threshold), judged after the run on the watcher's Machine reads, pure:
//   revert-below-floor  a machine that ran a release at or above the floor the bad release
//                       declares (release.yaml revertFloor) is later read on a release below
//                       it: a revert went below the floor (only a person's spec.version may).
// Whether a revert that started also ended (every machine back on its target) is the fault's
// own rule, `revert-not-ended` (faults.ts), judged while the run goes on.
import type { Observation } from "../invariants/index.js";
import { compareVersions } from "../release-decision/version-order.js";
import type { TortureViolation } from "./violation.js";

export function belowFloor(
  history: readonly Observation[],
  floor: string,
  from: number,
): TortureViolation[] {
  const atOrAbove = new Set<string>();
  const out: TortureViolation[] = [];
  for (const h of history) {
    if (h.kind !== "machine") continue;
    const name = h.machine.metadata.name;
    const v = h.machine.status?.version;
    if (v === undefined) continue;
    if (compareVersions(v, floor) >= 0) {
      atOrAbove.add(name);
      continue;
    }
    if (h.at < from || !atOrAbove.has(name)) continue;
    atOrAbove.delete(name); // once per descent
    out.push({
      rule: "revert-below-floor",
      at: h.at,
      machine: name,
      message: `${name} went down to ${v}, below ${floor}, the revert floor the bad release declares: a revert went below the floor`,
    });
  }
  return out;
}
