// Towards the target: a machine that runs another release than the Cluster's target gets it
// into the other slot (withdraw what is there, download, retry) and, once staged, through boot
// files, approval, turn and drain to the check-and-reboot. Also what counts as running the
// target (its version, whatever digest the catalog names now).
import { approves } from "../coordinator/turn.js";
import { armHold } from "./arming.js";
import { sameRelease, type ReleaseRef } from "../api/types.js";
import { d, WAIT, type Action, type Decision, type Observed } from "./decision.js";
import { disrupted, giveBack } from "./give-back.js";
import { timedOut, type Timeouts } from "./phases.js";

/** Staged for the target: boot files, approval, turn, drain, check, reboot. */
function decideStaged(o: Observed, release: ReleaseRef): Decision {
  if (o.bootFilesDue) {
    // Part of staging: a release the ESP cannot take fails here, with the node still serving.
    const action: Action = { kind: "install-boot-files", slot: o.other.slot, release };
    return d("Downloading", "Downloading", action, "staged; installing its kernel and initrd");
  }
  const hold = armHold(o.noVerdict, release);
  if (hold !== undefined) {
    // No verdict on the release (never failedReleases): the machine, not the release, needs a
    // person. Give the turn back first, then wait for liken.sh/retry or a new target.
    if (disrupted(o)) {
      return giveBack(o, "TrialNotArmed", "Failed", hold);
    }
    return d("TrialNotArmed", "Failed", WAIT, hold);
  }
  if (o.policy === "Manual" && !approves(o.approval, release)) {
    const why = `waiting for liken approve-reboot of ${release.version}`;
    return d("AwaitingApproval", "RebootPending", WAIT, why);
  }
  if (o.blocking !== undefined && !disrupted(o) && o.drainedDigest !== release.digest) {
    // A pod that must not be cut runs here: no turn asked, one not begun given back.
    return d("AwaitingTurn", "UpdatePending", WAIT, o.blocking.why);
  }
  if (!o.turn) {
    if (disrupted(o)) {
      // The turn was taken back (or lost) after the drain began, perhaps before the status
      // that announced it landed (seed 71742). The machine is down whatever its record says:
      // it stays Updating until its node is back, then uncordons, and only then says it did
      // not keep the turn (status.turnTakenBack), which is when the operator stops counting it.
      const why = "the turn is no longer held but a drain began for it; giving it back";
      return giveBack(o, "AwaitingTurn", "UpdatePending", why);
    }
    return d(
      "AwaitingTurn",
      "UpdatePending",
      { kind: "request-turn", release },
      "asked for a turn",
      {
        wantsTurn: true,
      },
    );
  }
  const held = { wantsTurn: true };
  if (o.turnPaused !== undefined && !disrupted(o) && o.drainedDigest !== release.digest) {
    // The budget filled since the grant (a machine Lost): no drain begins; UpdatePending says
    // so, and the operator then keeps the turn or takes it back (operator turns/paused.ts).
    return d("AwaitingTurn", "UpdatePending", WAIT, `the turn is ${o.turnPaused}; waiting`, held);
  }
  if (o.drainedDigest !== release.digest) {
    return d("Draining", "Updating", { kind: "drain", release }, "turn granted", {
      ...held,
      stage: "Draining",
    });
  }
  return d(
    "CheckingSlot",
    "Updating",
    { kind: "check-and-reboot", slot: o.other.slot, release },
    "drained",
    { ...held, stage: "CheckingSlot" },
  );
}

/** Running a different release than the target: get the target into the other slot. */
export function decideTowards(o: Observed, target: ReleaseRef, t: Timeouts): Decision {
  return o.held === undefined ? towards(o, target, t) : decideHeld(o, o.held);
}

function towards(o: Observed, target: ReleaseRef, t: Timeouts): Decision {
  if (o.failedDigests.includes(target.digest)) {
    const why = `${target.version} failed here before; not retried`;
    // Back from a fallback or a skipped trial: give the turn back and uncordon first.
    if (disrupted(o)) {
      return giveBack(o, "Failed", "Failed", why);
    }
    return d("Failed", "Failed", WAIT, why);
  }
  // Withdraw first, synced: a reboot after this point boots neither release.
  if (o.download !== undefined && !sameRelease(o.download, target)) {
    const action: Action = { kind: "cancel-download", failed: false };
    return d("Withdrawing", "Downloading", action, "target changed");
  }
  const other = o.other;
  if (
    (other.state === "staged" || other.state === "writing") &&
    !sameRelease(other.release, target)
  ) {
    if (disrupted(o)) {
      const reason = "target changed while holding a turn";
      return giveBack(o, "Withdrawing", "Downloading", reason);
    }
    return d(
      "Withdrawing",
      "Downloading",
      { kind: "withdraw", slot: other.slot },
      "target changed",
    );
  }
  if (other.state === "staged") return decideStaged(o, target);
  if (disrupted(o)) {
    // Back from a trial without a verdict (give-up.ts): give this turn back and uncordon; the
    // next try asks for a turn of its own and drains again.
    const reason = "back from a trial without a verdict; giving the turn back before trying again";
    return giveBack(o, "Downloading", "Downloading", reason);
  }
  if (o.download !== undefined) {
    if (timedOut("Downloading", o.downloadIdleSince, o.now, t)) {
      const why = `no progress for ${t.downloadMs} ms`;
      return d("Downloading", "Downloading", { kind: "cancel-download", failed: true }, why);
    }
    return d("Downloading", "Downloading", WAIT, "downloading");
  }
  if (o.downloadFailedAt !== undefined && o.now - o.downloadFailedAt < t.downloadRetryMs) {
    return d("Downloading", "Downloading", WAIT, "download failed; retrying later");
  }
  const action: Action = { kind: "download", slot: other.slot, release: target };
  return d("Downloading", "Downloading", action, `downloading ${target.version}`);
}

/**
 * Whether the running release is the target's version. A version names one build: the API
 * refuses a change of a catalog entry's digest, but an entry removed in one edit and added
 * back with another digest in the next gets past it. A machine that runs that version must not
 * stage the other build: cluster-operator counts it as on the target (status.version) and
 * would never grant the turn it asks for, while the Cluster reads Ready
 * (docs/adr/catalog-digest-immutable.md).
 */
export function runsTargetVersion(running: ReleaseRef | undefined, target: ReleaseRef): boolean {
  return running !== undefined && running.version === target.version;
}

/** Why a machine on the target's version is idle; names a digest that differs from the catalog's. */
export function runsTargetWhy(running: ReleaseRef | undefined, target: ReleaseRef): string {
  if (running === undefined || sameRelease(running, target)) return "runs the target";
  return (
    `runs ${target.version} as built with digest ${running.digest}; the catalog now names ` +
    `${target.digest} for that version, which is not rolled out: publish a rebuild under a new ` +
    `version and point spec.version at it`
  );
}

/**
 * Held by a person at the release it runs: no download, no turn asked for. What the machine
 * began is undone first: a download cancelled (the slot withdrawn), a drain given back (uncordon
 * once its node is back), a turn not begun given back by no longer asking. A trial boot already
 * under way was decided above: it finishes, since stopping it is one more disruption.
 */
function decideHeld(o: Observed, held: string): Decision {
  if (o.download !== undefined) {
    return d("Idle", "Ready", { kind: "cancel-download", failed: false }, held);
  }
  if (disrupted(o)) return giveBack(o, "Idle", "Ready", held);
  return d("Idle", "Ready", WAIT, held);
}
