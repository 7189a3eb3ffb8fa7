// The last failure on the way to the target, as the status says it (UpToDate and ReleaseStaged,
// status.ts): a failed action with its code, or a failed download. It stays until the same
// action succeeds, or a download stages its release.
import { errorCode, errorText } from "../errors.js";
import type { Problem } from "./status.js";
import type { Action } from "./steps.js";

/** The condition reason for a failed action, from its code where liken knows it. */
const REASONS: Readonly<Record<string, string>> = {
  LIKEN_AGENT_RELEASE_REFUSED: "ReleaseRefused",
  LIKEN_AGENT_REBOOT_FAILED: "RebootFailed",
  LIKEN_AGENT_SLOT_CHECK_FAILED: "SlotCheckFailed",
  LIKEN_AGENT_TRIAL_NOT_ARMED: "TrialNotArmed",
};

function reasonOf(code: string | undefined): string {
  if (code === undefined) return "ActionFailed";
  return REASONS[code] ?? (code.startsWith("LIKEN_DRAIN_") ? "DrainFailed" : "ActionFailed");
}

export class LastProblem {
  /** The last failure, and which action it came from. */
  private last: (Problem & { action: Action["kind"] }) | undefined;

  /** What the status says of it. */
  get problem(): Problem | undefined {
    const p = this.last;
    return p && { reason: p.reason, message: p.message };
  }

  /** `kind` succeeded: its own failure is over (a download's ends with its child: `download`). */
  done(kind: Action["kind"]): void {
    if (this.last?.action === kind && kind !== "download") this.last = undefined;
  }

  /** `kind` failed with `e`: the reason from its code, the message naming the code. */
  failed(kind: Action["kind"], e: unknown): void {
    const code = errorCode(e);
    const message = `${kind}: ${errorText(e)}${code ? ` [${code}]` : ""}`;
    this.last = { action: kind, reason: reasonOf(code), message };
  }

  /** A download's child ended: failed (`p`), or staged (undefined). */
  download(p: Problem | undefined): void {
    this.last = p && { action: "download", ...p };
  }
}
