// The drain: cordon, PDB-aware evictions, DRA ordering (docs/drain.md).
export { drainNode, blockerText, waitText } from "./drain.js";
export type { Blocker, DrainOptions, DrainProgress, DrainResult } from "./drain.js";
export { uncordonNode, type UncordonResult } from "./uncordon.js";
export { CORDONED_BY_ANNOTATION, CORDONED_BY_VALUE } from "./cordon.js";
export type { DriverPodSelector, DriverPodSelectors } from "./drivers.js";
export { DrainError, type DrainErrorCode } from "./errors.js";
export type { DrainPlan, DriverFinding, LeftPod, Wait, WaveName } from "./plan.js";
