// What a torture run reports broken: the checker's rules (src/invariants) and the torture's
// own, about the faults it draws. A module of its own: the rule modules (recall-rules.ts,
// revert-rules.ts) and the fault injector both use it, and neither imports the other.
import type { Violation } from "../invariants/index.js";

/** The checker's violations, and the torture's own rules about a bad release. */
export type TortureViolation = Omit<Violation, "rule"> & {
  rule:
    | Violation["rule"]
    | "bad-release-taken"
    | "bad-release-not-stopped"
    | "ca-rotation-not-rejoined"
    | "lapse-not-rejoined"
    | "recall-not-shown"
    | "recalled-release-granted"
    | "recalled-release-rebooted"
    | "revert-not-ended"
    | "revert-below-floor";
};
