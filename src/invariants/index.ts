export { checkHistory } from "./check.js";
export { RULES } from "./history.js";
export type { CheckSettings, History, Observation, Rel, Rule, Violation } from "./history.js";
