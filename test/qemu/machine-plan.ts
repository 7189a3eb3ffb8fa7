// What one run of the machine scenario proves (docs/machine-scenario.md, "What each run
// proves"). The QEMU tier runs the scenario once per bootloader; what does not depend on the
// bootloader (the v2 turn's host-side proofs: the adaptive download, the API cut, the real
// kubelet's drain and its grace, the DRA order; and a kubelet that never comes back) runs on one
// of them only, and each bootloader keeps what only it can prove: its own trial armed, booted
// and promoted, and its own fallback from a panicking release.

import type { MachineBootloader } from "../../testbed/machine/contract.js";

/**
 * `whole`: everything the scenario knows (the command line's default, one bootloader).
 * `bootloader`: what only the bootloader can prove: v1, the v2 trial promoted on the real
 * Node's new bootID, the v3 trial falling back, each boot on its own release's initrd.
 * `turn`: `bootloader` and the v2 turn's host-side proofs (the adaptive download, the API cut,
 * the workload's drain, the DRA order).
 * `kubelet-down`: `bootloader` and the v4 release whose kubelet never starts (two boots more).
 */
export type MachineScope = "whole" | "bootloader" | "turn" | "kubelet-down";
export const MACHINE_SCOPES: readonly MachineScope[] = [
  "whole",
  "bootloader",
  "turn",
  "kubelet-down",
];

export interface MachinePlan {
  scope: MachineScope;
  /** The two-pod workload, its budget and the spare Node: the drain's grace (`drain-grace-ok`). */
  workload: boolean;
  /** The DRA driver and its claim holder (`dra-unprepare-before-driver`). */
  dra: boolean;
  /** The way to the API server cut for 30 s within the v2 turn. */
  cutApi: boolean;
  /** The v4 release whose kubelet never starts (`kubelet-down-fell-back`). */
  kubeletDown: boolean;
  /** v2 fetched fewer bytes than its size (`v2-fetched`). */
  adaptive: boolean;
}

export function machinePlan(scope: MachineScope, cutApi = true): MachinePlan {
  const turn = scope === "whole" || scope === "turn";
  return {
    scope,
    workload: turn,
    dra: turn,
    cutApi: turn && cutApi,
    kubeletDown: scope === "whole" || scope === "kubelet-down",
    adaptive: turn,
  };
}

/**
 * The QEMU tier's split, so that the two runs side by side end close together: GRUB runs the
 * kubelet-down release (6 boots; its download, trial boot, prove deadline and fallback boot are
 * the longest single part: 320 s at load average 1-8, 455 s at 13-22, with a 180 s deadline),
 * systemd-boot the v2 turn's host-side proofs (4 boots; the workload and the DRA driver placed,
 * the 30 s cut, the drain: about 100 s, 150 s at 13-22). Before, GRUB ran both (917 s against
 * 486 s); on 2026-12-05, split so, at load 13-22: 1,434 s and 1,099 s from each host's start.
 */
export function tierScope(bootloader: MachineBootloader): MachineScope {
  return bootloader === "grub" ? "kubelet-down" : "turn";
}

/**
 * Whether the tier runs the two bootloaders' scenarios at once, from the host's cores: each
 * guest is one TCG vCPU, a thread that keeps one core busy while it runs, and much of each run
 * is waiting on its own timers (the agent's prove deadline, the cut, the drain's grace, the
 * watch for a retry), so two cores carry two guests; one core would only time-slice them.
 * LIKEN_MACHINE_SIDE_BY_SIDE=0|1 overrides it (1 on one core, 0 for a one-at-a-time comparison).
 */
export function sideBySide(cores: number, override?: string): { yes: boolean; why: string } {
  if (override === "0" || override === "1") {
    return {
      yes: override === "1",
      why: `LIKEN_MACHINE_SIDE_BY_SIDE=${override}: ${override === "1" ? "side by side" : "one after the other"} as asked (${cores} cores)`,
    };
  }
  return cores >= 2
    ? {
        yes: true,
        why: `${cores} cores: the two bootloaders side by side, one TCG vCPU each`,
      }
    : {
        yes: false,
        why: `${cores} core: the two bootloaders one after the other (a second TCG vCPU would only share it)`,
      };
}
