// The machine scenario's split between the bootloaders (test/qemu/machine-plan.ts): every proof
// that does not depend on the bootloader runs on exactly one of them (the kubelet-down release
// on GRUB, the v2 turn's host-side proofs on systemd-boot), and the side-by-side decision
// follows the host's cores.
import { describe, expect, it } from "vitest";
import { MACHINE_BOOTLOADERS } from "../../testbed/machine/contract.js";
import { machinePlan, sideBySide, tierScope } from "../qemu/machine-plan.js";

describe("machine plan", () => {
  it.each([
    ["whole", true, { workload: true, dra: true, cutApi: true, kubeletDown: true, adaptive: true }],
    [
      "whole",
      false,
      { workload: true, dra: true, cutApi: false, kubeletDown: true, adaptive: true },
    ],
    [
      "bootloader",
      true,
      { workload: false, dra: false, cutApi: false, kubeletDown: false, adaptive: false },
    ],
    ["turn", true, { workload: true, dra: true, cutApi: true, kubeletDown: false, adaptive: true }],
    [
      "turn",
      false,
      { workload: true, dra: true, cutApi: false, kubeletDown: false, adaptive: true },
    ],
    [
      "kubelet-down",
      true,
      { workload: false, dra: false, cutApi: false, kubeletDown: true, adaptive: false },
    ],
  ] as const)("scope %s (cut %s)", (scope, cut, want) => {
    expect(machinePlan(scope, cut)).toEqual({ scope, ...want });
  });

  it("the QEMU tier proves each bootloader-independent part exactly once", () => {
    const plans = MACHINE_BOOTLOADERS.map((b) => machinePlan(tierScope(b)));
    for (const k of ["workload", "dra", "cutApi", "kubeletDown", "adaptive"] as const)
      expect(plans.filter((p) => p[k]).length, k).toBe(1);
  });

  it("the QEMU tier balances the runs: the kubelet-down release and the turn's proofs on different bootloaders", () => {
    expect(Object.fromEntries(MACHINE_BOOTLOADERS.map((b) => [b, tierScope(b)]))).toEqual({
      grub: "kubelet-down",
      "systemd-boot": "turn",
    });
  });

  it.each([
    [1, undefined, false],
    [2, undefined, true],
    [8, undefined, true],
    [1, "1", true],
    [8, "0", false],
    [2, "yes", true],
  ] as const)("%i cores, override %s: side by side %s", (cores, override, yes) => {
    const d = sideBySide(cores, override);
    expect(d.yes).toBe(yes);
    expect(d.why).toContain(`${cores} core`);
  });
});
