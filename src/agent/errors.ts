// The agent's error family: what went wrong in the daemon's own wiring (its config file, its
// memory, the reboot command). Failures of the pieces it drives keep their own families
// (LIKEN_SLOT_*, LIKEN_DRAIN_*, LIKEN_API_*, LIKEN_BOOTLOADER_*).
import { LikenError, type LikenErrorOptions } from "../errors.js";

export type AgentCode =
  | "LIKEN_AGENT_CONFIG_INVALID"
  | "LIKEN_AGENT_REBOOT_FAILED"
  | "LIKEN_AGENT_DOWNLOAD_FAILED"
  /** The channel's release.yaml could not be fetched or does not match the catalog digest. */
  | "LIKEN_AGENT_RELEASE_REFUSED"
  /** The slot or the turn could not be read before the trial: nothing decided, tried again. */
  | "LIKEN_AGENT_SLOT_CHECK_FAILED"
  /** Reading the slot back took longer than timeouts.slotCheckMs. */
  | "LIKEN_AGENT_SLOT_CHECK_TIMEOUT"
  /**
   * The bootloader failed to arm the trial or did not read back armed: no verdict on the
   * release; counted and armed again, at most MAX_ARM_ATTEMPTS times (arming.ts).
   */
  | "LIKEN_AGENT_TRIAL_NOT_ARMED"
  /** This boot's id (config bootId) cannot be read: no trial is judged without it. */
  | "LIKEN_AGENT_BOOT_ID_UNREADABLE"
  /** The machine's certificate request was denied or failed (docs/machine.md, "Identity"). */
  | "LIKEN_AGENT_IDENTITY_REFUSED"
  /**
   * The machine has no usable certificate and cannot get one: no bootstrap credential is
   * configured, or it was not accepted (revoked, expired).
   */
  | "LIKEN_AGENT_IDENTITY_UNAVAILABLE"
  /**
   * The machine's certificate expired while its renewal waited: the agent stops asking with it
   * and joins again with the bootstrap credential (docs/machine.md, "Identity").
   */
  | "LIKEN_AGENT_IDENTITY_EXPIRED"
  /**
   * The API server answers 401 to the machine's certificate while it is still valid (the
   * client CA rotated, the certificate revoked): the agent joins again with the bootstrap
   * credential (identity/refusals.ts bounds how often).
   */
  | "LIKEN_AGENT_IDENTITY_NOT_ACCEPTED";

export class AgentError extends LikenError {
  constructor(code: AgentCode, message: string, opts: LikenErrorOptions = {}) {
    super(code, message, opts);
  }
}
