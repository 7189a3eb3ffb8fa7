// The machine scenario (issue 13): liken-agent under systemd in a QEMU
// guest, rolled by the real control plane and cluster-operator from v1 to v2 (a trial that
// proves itself, with the way to the API server cut during the turn) and to v3 (a trial that
// panics and falls back). One backend at a time: each guest and its control plane keep the
// machine's two cores busy. Nothing a run started may still run afterwards.
import { describe, expect, it } from "vitest";
import type { MachineBootloader } from "../../images/machine/contract.js";
import { processesNaming } from "./leftovers.js";
import { cleanUp, runMachineScenario } from "./machine.js";
import { qemuGuest } from "./machine-qemu.js";

/**
 * GRUB only, for now. systemd-boot's scenario passed its first whole run once its one-shot was
 * armed as a glob (docs/machine-scenario.md), but one run is not yet a reason to put another
 * 13 minutes into every CI run; its image boots into a serving agent in machine-image.test.ts.
 */
const BOOTLOADERS: readonly MachineBootloader[] = ["grub"];

/** The image build (cached after the first) plus the run; the run's own deadlines are tighter. */
const SCENARIO_TIMEOUT_MS = 1_800_000;

describe("machine scenario", () => {
  it.each(BOOTLOADERS.map((b) => [b]))(
    "bootloader %s",
    async (bootloader) => {
      const log = (l: string): void => console.log(`[${bootloader}] ${l}`);
      const run = await runMachineScenario({
        bootloader,
        guest: qemuGuest(bootloader, log),
        out: log,
      });
      log(run.problems.length === 0 ? run.summary : `FAILED; logs in ${run.dir}`);
      cleanUp(run, false);
      expect(run.problems).toEqual([]);
      expect(processesNaming(run.marks)).toEqual([]);
    },
    SCENARIO_TIMEOUT_MS,
  );
});
