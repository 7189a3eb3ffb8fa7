// The agent's state machine as data: a closed union of phases (phases.ts), a named timeout per
// phase, and one pure function `decide(observed, timeouts)` that says which phase the machine is
// in and the single next action. The daemon (daemon.ts) only observes, calls decide, and
// performs the action; every rule of the page's section 3 lives here or in the modules decide()
// dispatches to (trial-armed.ts, trial-boot.ts, towards.ts, give-back.ts), and is table-tested.
//
// Must never (the invariant): reboot without a recorded turn for the staged release; arm a trial
// of a slot that is not staged for the target (the slot check itself runs inside the
// "check-and-reboot" action, right before arming); leave the machine with no bootable default
// (the default slot only changes in "promote", after the trial boot rejoined).
import { d, WAIT, type Action, type Decision, type Observed } from "./decision.js";
import { disrupted, giveBack } from "./give-back.js";
import { DEFAULT_TIMEOUTS, type Timeouts } from "./phases.js";
import { decideTowards, runsTargetVersion, runsTargetWhy } from "./towards.js";
import {
  decideArmed,
  decideFellBack,
  decideNotTaken,
  trialNotArmed,
  trialNotTaken,
} from "./trial-armed.js";
import { decideOnTrial } from "./trial-boot.js";

// The names the agent, the simulator and the tests import from here, wherever they live now.
export {
  DEFAULT_TIMEOUTS,
  PHASE_TIMEOUT,
  PHASES,
  phaseTimeoutMs,
  timedOut,
  type Phase,
  type TimedPhase,
  type Timeouts,
} from "./phases.js";
export type { Action, Decision, Observed, SlotView } from "./decision.js";
export { disrupted } from "./give-back.js";
export { notRejoined } from "./trial-boot.js";
export { trialNotArmed, trialNotTaken } from "./trial-armed.js";
export { runsTargetVersion, runsTargetWhy } from "./towards.js";
export {
  afterSlotCheck,
  beforeDrain,
  rebootingDecision,
  toTurnLook,
  type CheckVerdict,
  type DrainVerdict,
  type SlotCheck,
  type TurnLook,
} from "./step-verdicts.js";

export function decide(o: Observed, t: Timeouts = DEFAULT_TIMEOUTS): Decision {
  const boot = o.boot;
  const notTaken = trialNotTaken(o);
  if (notTaken !== null) return decideNotTaken(o, notTaken);
  const notArmed = trialNotArmed(o);
  if (notArmed !== null) {
    // The turn is still held: count the attempt, disarm what half an arm left, arm again.
    const why =
      `the trial of slot ${notArmed} was never shown armed before the reboot ` +
      "(a power cut or a failed arm): no verdict on the release";
    const action: Action = { kind: "not-armed-report", slot: notArmed };
    return d("TrialNotArmed", "Updating", action, why, { wantsTurn: true });
  }
  switch (boot.kind) {
    case "on-trial":
      return decideOnTrial(o, boot.slot, t);
    case "trial-failed":
      return decideFellBack(o, boot.slot);
    case "armed":
      return decideArmed(o, boot.slot);
    case "steady":
    case "off-default":
      break;
    default: {
      const never: never = boot;
      throw new Error(`unknown boot verdict ${JSON.stringify(never)}`);
    }
  }
  if (!o.apiReachable) {
    return d("Disconnected", "Ready", WAIT, "API server not reachable; serving on", {
      wantsTurn: false,
    });
  }
  const target = o.target;
  if (target === undefined || runsTargetVersion(o.running.release, target)) {
    const idle = target === undefined ? "no target" : runsTargetWhy(o.running.release, target);
    if (o.download !== undefined) {
      return d("Idle", "Ready", { kind: "cancel-download", failed: false }, idle);
    }
    if (disrupted(o)) {
      const reason = "runs the target";
      return giveBack(o, "Idle", "Ready", reason);
    }
    return d("Idle", "Ready", WAIT, idle);
  }
  return decideTowards(o, target, t);
}
