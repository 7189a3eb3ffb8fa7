// The one interface every bootloader backend implements, shaped by what the agent needs:
//   (a) arm a boot-once trial of the new slot, only after that slot verified;
//   (b) after the trial boot, once the machine rejoined, make that slot the default;
//   (c) back on the old slot after a failed trial, see that the trial did not take.
// Which slot is running right now is a fact of the running kernel (its command line), not of the
// bootloader's stored state, so `judgeBoot` combines the two.
import { BootloaderError } from "./errors.js";

export type Slot = "a" | "b";
export const SLOTS: readonly Slot[] = ["a", "b"];

export type BackendName = "grub" | "systemd-boot";

/** What the bootloader's stored state says, read back from the medium. */
export interface BootRecord {
  /** The slot that boots when no trial is armed. */
  defaultSlot: Slot;
  /** A boot-once trial armed for the next boot, not started yet. */
  armed: Slot | null;
  /** A trial the bootloader started (it consumed the boot-once) and nobody confirmed or disarmed. */
  started: Slot | null;
  /**
   * The boot-once state as the bootloader stores it, in its own names (grubenv's variables,
   * systemd-boot's EFI variables and entry files), for the messages a person reads when a trial
   * was not taken.
   */
  shows?: string;
}

/** An artifact of a release as the slot holds it (verify/release.ts's Artifact has these). */
export interface BootArtifact {
  name: string;
  size: number;
  /** `sha256:<hex>` of the whole artifact. */
  digest: string;
  /** Where it starts in the slot. */
  offset: number;
}

/** A slot device and the release staged in it, read back and matched. */
export interface BootSource {
  device: string;
  release: { version: string; artifacts: readonly BootArtifact[] };
}

export interface Bootloader {
  readonly backend: BackendName;
  /** Reads the stored state; throws BootloaderError when it cannot be trusted. */
  read(): Promise<BootRecord>;
  /**
   * Arms a boot-once trial of `slot` for the next boot. Must never be called before the slot
   * verified. Refuses the default slot (a trial of what already boots proves nothing).
   */
  armTrial(slot: Slot): Promise<void>;
  /** Makes `slot` the default after its trial boot rejoined; clears the trial. Idempotent. */
  confirm(slot: Slot): Promise<void>;
  /**
   * Puts what this bootloader loads from outside the slot in place for `slot` (systemd-boot: the
   * release's kernel and initrd on the ESP), before armTrial. Absent when the bootloader reads
   * everything from the slot (GRUB). Refuses the default slot; never touches it.
   */
  installBootFiles?(slot: Slot, source: BootSource): Promise<void>;
  /** Withdraws an armed trial and forgets a started one (after reporting it). Idempotent. */
  disarm(): Promise<void>;
}

export type BootVerdict =
  /** Running the default slot, no trial outstanding. */
  | { kind: "steady"; slot: Slot }
  /** A trial is armed and the reboot has not happened yet. */
  | { kind: "armed"; slot: Slot }
  /** This boot is the trial: confirm once the machine rejoined the cluster. */
  | { kind: "on-trial"; slot: Slot }
  /** The bootloader started a trial of `slot`, but the machine came back on `running`. */
  | { kind: "trial-failed"; slot: Slot; running: Slot }
  /** Running a slot that is not the default and no trial explains it (chosen by hand?). */
  | { kind: "off-default"; slot: Slot; defaultSlot: Slot };

/** Combines the stored record with the slot the running kernel says it booted from. */
export function judgeBoot(record: BootRecord, running: Slot): BootVerdict {
  if (record.started !== null) {
    return record.started === running
      ? { kind: "on-trial", slot: running }
      : { kind: "trial-failed", slot: record.started, running };
  }
  if (record.armed !== null) return { kind: "armed", slot: record.armed };
  if (running !== record.defaultSlot) {
    return { kind: "off-default", slot: running, defaultSlot: record.defaultSlot };
  }
  return { kind: "steady", slot: running };
}

export function isSlot(v: unknown): v is Slot {
  return v === "a" || v === "b";
}

export function otherSlot(s: Slot): Slot {
  return s === "a" ? "b" : "a";
}

/** The slot the running kernel was booted from: `liken.slot=a|b` on its command line. */
export function runningSlotFromCmdline(cmdline: string): Slot {
  const m = /(?:^|\s)liken\.slot=(\S+)/.exec(cmdline);
  const v = m?.[1];
  if (!isSlot(v)) {
    throw new BootloaderError(
      "LIKEN_BOOTLOADER_BAD_SLOT",
      `kernel command line has no liken.slot=a|b (got ${v === undefined ? "nothing" : JSON.stringify(v)}); ` +
        "the boot entries liken installs always pass it: reinstall the bootloader configuration",
      { context: { cmdline } },
    );
  }
  return v;
}
