// A trial armed by this agent and not (yet) started: armed and the reboot due (only with the
// turn), or a later boot of the old slot that did not start it (the bootloader did not take it,
// or it was never shown armed), or the bootloader fell back from it. Each is judged from the
// bootloader's verdict and memory alone, so they come before the API is even asked.
import type { Slot } from "../bootloader/types.js";
import { sameRelease } from "../api/types.js";
import { d, WAIT, type Action, type Decision, type Observed } from "./decision.js";
import { disrupted, rejoining } from "./give-back.js";

/** A trial armed but not booted: reboot only with the turn, else withdraw the trial. */
export function decideArmed(o: Observed, slot: Slot): Decision {
  const staged = o.other.state === "staged" && o.other.slot === slot ? o.other.release : undefined;
  if (!o.apiReachable) {
    return d(
      "Rebooting",
      "Updating",
      WAIT,
      "trial armed; API unreachable: no reboot without a turn",
      {
        stage: "Rebooting",
        wantsTurn: true,
      },
    );
  }
  if (staged === undefined || !sameRelease(staged, o.target)) {
    const reason = "the armed trial no longer matches the target";
    return d("Withdrawing", "Updating", { kind: "disarm", reason }, reason);
  }
  if (o.failedDigests.includes(staged.digest)) {
    // Recorded as failed (a trial not taken, after a crash before its disarm): never reboot
    // into it again.
    const reason = `the armed trial of ${staged.version} failed here before`;
    return d("Failed", "Failed", { kind: "disarm", reason }, reason);
  }
  if (!o.turn) {
    const reason = "trial armed but no turn is recorded for it";
    return d("AwaitingTurn", "UpdatePending", { kind: "disarm", reason }, reason, {
      wantsTurn: true,
    });
  }
  return d("Rebooting", "Updating", { kind: "reboot", reason: "trial armed" }, "trial armed", {
    stage: "Rebooting",
    wantsTurn: true,
  });
}

/**
 * The trial armed in an earlier boot that this boot did not start: the machine rebooted, and
 * the bootloader booted the old slot with the boot-once entry still armed (GRUB: next_entry set,
 * liken_trial empty; systemd-boot: LoaderEntryOneShot still set) or consumed without starting
 * the trial (no counted try). A restart of the agent within the arming boot is not that: the
 * reboot is still due. A trial the bootloader started shows as on-trial or trial-failed.
 * A verdict only for a trial the bootloader was shown to hold: read back armed before the
 * reboot (`shown`), or still armed now; else it is trialNotArmed().
 */
export function trialNotTaken(o: Pick<Observed, "boot" | "bootId" | "armedTrial">): Slot | null {
  const slot = bootNotStarting(o);
  if (slot === null) return null;
  return o.armedTrial?.shown === true || o.boot.kind === "armed" ? slot : null;
}

/**
 * As trialNotTaken, but the bootloader was never shown to hold the trial (only the intent was
 * recorded: a power cut or a failed arm before the read-back) and shows nothing armed now: the
 * old default booted because nothing was armed. A failure to look, not a verdict (arming.ts).
 */
export function trialNotArmed(o: Pick<Observed, "boot" | "bootId" | "armedTrial">): Slot | null {
  const slot = bootNotStarting(o);
  if (slot === null) return null;
  return o.armedTrial?.shown === true || o.boot.kind === "armed" ? null : slot;
}

/** The slot of a trial recorded in an earlier boot that this boot did not start, or null. */
function bootNotStarting(o: Pick<Observed, "boot" | "bootId" | "armedTrial">): Slot | null {
  const t = o.armedTrial;
  if (t === undefined || t.bootId === undefined || t.bootId === o.bootId) return null;
  if (o.boot.kind !== "armed" && o.boot.kind !== "steady") return null;
  return o.boot.slot === t.slot && o.boot.kind === "steady" ? null : t.slot;
}

/** The bootloader did not take the trial: purely local, never armed or rebooted again for it. */
export function decideNotTaken(o: Observed, slot: Slot): Decision {
  const why = `the bootloader did not take the trial of slot ${slot}`;
  const action: Action = { kind: "not-taken-report", slot };
  // A turn still held (drained for it) is kept until this boot rejoins (giveBack).
  if (disrupted(o)) return rejoining(why, action);
  return d("TrialNotTaken", "Failed", action, why);
}

/**
 * The trial fell back: purely local (bootloader + memory), reported to the API when it is
 * reachable. The turn it drained for is kept until this boot rejoins (giveBack), so the report
 * must not read as over (step Failed) to the operator meanwhile.
 */
export function decideFellBack(o: Observed, slot: Slot): Decision {
  const action: Action = { kind: "fall-back-report", slot };
  if (disrupted(o)) return rejoining("trial fell back", action);
  return d("FallingBack", "Failed", action, "trial fell back");
}
