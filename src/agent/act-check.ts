// The check-and-reboot step of the agent's actions: read the staged slot back within
// slotCheckMs and the turn again, then follow afterSlotCheck() (step-verdicts.ts): arm the trial
// and show it armed, reboot without the trial after a mismatch, or leave it to the next look.
//
// Must never: arm a trial before the slot read back and matched and the turn was read again;
// remember a release as failed because a look failed. The slot check is loaded when it runs.
import { rfc3339 } from "../api/time.js";
import type { ReleaseRef } from "../api/types.js";
import type { Slot } from "../bootloader/types.js";
import { errorCode, errorText } from "../errors.js";
import { phase, withDeadline, type ActionParts } from "./act-parts.js";
import { MAX_ARM_ATTEMPTS } from "./arming.js";
import type { Observed } from "./decision.js";
import { AgentError } from "./errors.js";
import { armed, armShown, notArmed, skipped } from "./memory.js";
import { phaseTimeoutMs } from "./phases.js";
import { afterSlotCheck, toTurnLook, type CheckVerdict, type SlotCheck } from "./step-verdicts.js";

/** The other actions the check-and-reboot runs (act.ts Actions). */
export interface CheckHooks {
  /** The staged release's kernel and initrd into place for `slot`. */
  putBootFiles: (slot: Slot) => Promise<void>;
  /** Withdraws the trial: intent, bootloader, memory. */
  disarm: () => Promise<void>;
  /** Runs the reboot; with a command, waits rebootMs for the machine to go down. */
  reboot: (reason: string) => Promise<void>;
}

/** Checks the staged slot and arms its trial; at most one read-back runs at a time. */
export class CheckAndReboot {
  /** A slot read-back still running past its deadline; no second one starts beside it. */
  private checking: Promise<unknown> | undefined;

  constructor(
    private readonly p: ActionParts,
    private readonly hooks: CheckHooks,
  ) {}

  /**
   * Reads the staged slot back within slotCheckMs and the turn again, then follows
   * afterSlotCheck(): arm and reboot, reboot without the trial, or leave it to the next tick.
   */
  async checkAndReboot(o: Observed, slot: Slot, release: ReleaseRef): Promise<void> {
    const check = await phase(this.p, "check slot", () => this.checkSlot(slot, o.running.slot));
    const turn = toTurnLook(await this.p.turnHeld(release));
    const verdict = afterSlotCheck(check, turn, this.p.signal.aborted, slot, release);
    await this.follow(verdict, slot, release, o.bootId);
  }

  /** Carries out a check-and-reboot verdict; `bootId`: this boot, recorded with the trial. */
  async follow(v: CheckVerdict, slot: Slot, release: ReleaseRef, bootId?: string): Promise<void> {
    const { memory, log, bootloader } = this.p;
    const at = rfc3339(new Date());
    switch (v.kind) {
      case "stand-down":
        log.warn({ why: v.why }, "not arming the trial");
        return;
      case "retry":
        throw new AgentError(
          "LIKEN_AGENT_SLOT_CHECK_FAILED",
          `${v.why}${v.code ? ` [${v.code}]` : ""}; nothing is remembered, tried again at the next look`,
          { retryable: true, context: { slot, version: release.version, cause: v.code } },
        );
      case "arm":
        // systemd-boot loads the kernel from the ESP: installed when the slot was staged, and
        // checked again here, before arming; what a kill midway or a person changed since is
        // installed again (docs/machine.md).
        if (bootloader.installBootFiles !== undefined) await this.hooks.putBootFiles(slot);
        // The intent, recorded before the bootloader is touched: after a crash in between, the
        // agent still knows which release it meant to try, and that it never saw it armed.
        await memory.update((m) => armed(m, release, slot, at, bootId));
        await phase(this.p, "arm trial", () => this.armAndShow(slot, release));
        await this.p.reportRebooting(v.why);
        return this.hooks.reboot(v.why);
      case "skip-trial":
        // The page: "it reboots without the trial when they do not match".
        await memory.update((m) => skipped(m, release, slot, at, v.why));
        await this.p.reportRebooting(`without the trial: ${v.why}`);
        return this.hooks.reboot(`without the trial: ${v.why}`);
      default: {
        const never: never = v;
        throw new Error(`unknown verdict ${JSON.stringify(never)}`);
      }
    }
  }

  /**
   * Arms the trial and reads the bootloader back: only a trial it shows armed is recorded as
   * shown (its outcome is then a verdict on the release). An arm that fails, or reads back
   * anything else, is counted as not armed (arming.ts: no verdict, tried again, bounded), what
   * half of it may have left is disarmed, and the step fails with LIKEN_AGENT_TRIAL_NOT_ARMED.
   */
  private async armAndShow(slot: Slot, release: ReleaseRef): Promise<void> {
    const { memory, bootloader, log } = this.p;
    let why: string;
    try {
      await bootloader.armTrial(slot);
      const r = await bootloader.read();
      if (r.armed === slot) {
        await memory.update((m) => armShown(m, rfc3339(new Date())));
        return;
      }
      why = `${bootloader.backend} reads back ${r.shows ?? `armed ${r.armed ?? "none"}`}`;
    } catch (e) {
      why = `${errorText(e)}${errorCode(e) ? ` [${errorCode(e)}]` : ""}`;
    }
    await memory.update((m) => notArmed(m, why, rfc3339(new Date())));
    const attempts = memory.now.noVerdict?.attempts ?? 1;
    try {
      await this.hooks.disarm();
    } catch (e) {
      // The trial stays recorded as being withdrawn, never shown: a later boot that does not
      // start it is no verdict (trial-armed.ts trialNotArmed) and is not counted a second time.
      log.warn({ err: errorText(e), code: errorCode(e) }, "disarm after a failed arm failed");
    }
    throw new AgentError(
      "LIKEN_AGENT_TRIAL_NOT_ARMED",
      `the trial of ${release.version} in slot ${slot} could not be armed (attempt ${attempts} ` +
        `of ${MAX_ARM_ATTEMPTS}): ${why}; no verdict on the release, armed again at the next ` +
        "look while attempts remain",
      { retryable: true, context: { slot, version: release.version, attempts } },
    );
  }

  /**
   * The read-back of the slot against its staged release, within slotCheckMs. A throw (EIO, the
   * slot not staged) or the deadline is "could not look", never a mismatch: only bytes that read
   * back wrong condemn a release.
   */
  private async checkSlot(slot: Slot, running: Slot): Promise<SlotCheck> {
    const { cfg } = this.p;
    if (this.checking !== undefined) {
      // The native read cannot be cancelled: a second one beside it would only compete for the disk.
      const message = "the previous read-back, past its deadline, still runs";
      return { kind: "unread", code: "LIKEN_AGENT_SLOT_CHECK_TIMEOUT", message };
    }
    const ms = phaseTimeoutMs("CheckingSlot", cfg.timeouts);
    // Loaded when it runs: the agent's idle loop does not need the slot check's modules.
    const reading = import("../slots/check.js").then(({ verifyStagedSlot }) =>
      verifyStagedSlot(cfg.slots, { slot, running, direct: cfg.direct }),
    );
    const late = (): Error =>
      new AgentError(
        "LIKEN_AGENT_SLOT_CHECK_TIMEOUT",
        `reading slot ${slot} back took longer than timeouts.slotCheckMs (${ms} ms)`,
        { retryable: true },
      );
    try {
      const r = await withDeadline(reading, ms, late);
      return r.ok ? { kind: "matched" } : { kind: "mismatch", problems: r.problems };
    } catch (e) {
      if (errorCode(e) === "LIKEN_AGENT_SLOT_CHECK_TIMEOUT") {
        this.checking = reading.catch(() => undefined).finally(() => (this.checking = undefined));
      }
      return { kind: "unread", code: errorCode(e), message: errorText(e) };
    }
  }
}
