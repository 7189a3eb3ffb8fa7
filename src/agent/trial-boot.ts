// The trial boot (boot verdict on-trial): prove it within proveMs, its Node showing this boot
// Ready and then every health gate passing, and promote; else reboot without promoting, with
// the reason the report after the fallback gives (a verdict, or none when the Node was never
// read).
import type { Slot } from "../bootloader/types.js";
import type { GiveUpReason } from "./give-up.js";
import { gateStep, healthGiveUp } from "./health.js";
import { bootIdText, rejoinOf, type Rejoin } from "./rejoin.js";
import { sameRelease } from "../api/types.js";
import { d, WAIT, type Action, type Decision, type Observed } from "./decision.js";
import { timedOut, type Timeouts } from "./phases.js";

/**
 * The trial boot: prove it within proveMs (its Node shows THIS boot, Ready since it: rejoin.ts;
 * then every health gate), else reboot without promoting: the bootloader boots the old default.
 * A release that is no longer the target is never promoted: the machine falls back at once.
 */
export function decideOnTrial(o: Observed, slot: Slot, t: Timeouts): Decision {
  const stage = { stage: "Proving" as const, wantsTurn: true };
  const running = o.running.release;
  if (o.apiReachable && o.target !== undefined && running !== undefined) {
    if (!sameRelease(running, o.target)) {
      // The turn is still held, so this reboot is covered; not a verdict on the release.
      const reason =
        `trial of ${running.version} in slot ${slot}: the Cluster's target is now ` +
        `${o.target.version}; not promoted, falling back`;
      const action: Action = { kind: "reboot", reason, failure: "TargetChanged" };
      return d("Proving", "Updating", action, reason, stage);
    }
  }
  const rejoin = rejoinOf(o);
  if (rejoin.kind === "rejoined") return decideGates(o, slot, t);
  if (timedOut("Proving", o.trialSeenAt, o.now, t)) {
    // The turn is still held (its record stays until we give it back), so this reboot is
    // covered; next_entry was consumed, so the bootloader boots the old default.
    const { reason, failure } = notRejoined(o, slot, t, rejoin);
    return d("Proving", "Updating", { kind: "reboot", reason, failure }, reason, stage);
  }
  return d("Proving", "Updating", WAIT, `waiting for the trial to rejoin: ${rejoin.why}`, stage);
}

/**
 * Why a trial that did not rejoin in time is given up: a verdict (NodeNotRejoined) when its
 * Node was read at least once on this boot, else no verdict (TrialUnobserved): a failure to
 * look for the whole deadline says nothing about the release.
 */
export function notRejoined(
  o: Pick<Observed, "nodeBootIds" | "nodeName" | "bootId">,
  slot: Slot,
  t: Pick<Timeouts, "proveMs">,
  rejoin: Exclude<Rejoin, { kind: "rejoined" }>,
): { reason: string; failure: GiveUpReason } {
  const within = `trial of slot ${slot} did not rejoin within ${t.proveMs} ms`;
  const seen = o.nodeBootIds ?? [];
  if (rejoin.kind === "unread" && seen.length === 0) {
    return {
      reason: `${within}: never read Node ${o.nodeName} (${rejoin.why}); no verdict on the release`,
      failure: "TrialUnobserved",
    };
  }
  const ids = seen.map(bootIdText).join(", ");
  const reason =
    rejoin.kind === "not-rejoined"
      ? `${within}: ${rejoin.why} (bootIDs it showed on this boot: ${ids || "(none)"})`
      : `${within}: ${rejoin.why}; earlier Node ${o.nodeName} showed bootID ${ids}, ` +
        `this boot is ${o.bootId}`;
  return { reason, failure: "NodeNotRejoined" };
}

/** The trial rejoined: promote once every health gate passed, within the same deadline. */
function decideGates(o: Observed, slot: Slot, t: Timeouts): Decision {
  const stage = { stage: "Proving" as const, wantsTurn: true };
  const gates = gateStep(o.health, o.now);
  if (gates.kind === "passed") {
    const why = o.health?.gates.length
      ? "the trial rejoined and every health gate passed"
      : "the trial rejoined";
    return d("Proving", "Updating", { kind: "promote", slot }, why, stage);
  }
  if (timedOut("Proving", o.trialSeenAt, o.now, t)) {
    // As for a trial that does not rejoin: the turn is still held; no promotion, so the
    // bootloader boots the old default.
    const reason = healthGiveUp(slot, t.proveMs, gates);
    const action: Action = { kind: "reboot", reason, failure: "HealthCheckFailed" };
    return d("Proving", "Updating", action, reason, stage);
  }
  if (gates.kind === "check")
    return d("Proving", "Updating", { kind: "check-health" }, gates.why, stage);
  return d("Proving", "Updating", WAIT, gates.why, stage);
}
