// The machine scenario (issues 13, 25 and 39): liken-agent under systemd in a QEMU guest that is
// a real Kubernetes node (its kubelet registers the Node), rolled by the real control plane and
// cluster-operator. Each bootloader proves its own: v2, a trial that proves itself on the
// Node's new bootID and is promoted, and v3, a trial that panics and falls back. The parts that
// do not depend on the bootloader run once, split so that the two runs end close together
// (machine-plan.ts, tierScope; docs/machine-scenario.md, "What each run proves"): GRUB also
// rolls to v4, whose kubelet never starts (NodeNotRejoined); systemd-boot's v2 turn also has the
// way to the API server cut, the drain's pods stopped by the kubelet, a DRA claim holder removed
// before its driver, and the adaptive download checked. The two run side by side when the host
// has a core for each guest. Nothing a run started may still run afterwards.
import { availableParallelism } from "node:os";
import { describe, expect, it } from "vitest";
import { accelerator, acceleratorLine } from "../../testbed/accelerator.js";
import { MACHINE_BOOTLOADERS } from "../../testbed/machine/contract.js";
import { processesNaming } from "./leftovers.js";
import { cleanUp, runMachineScenario } from "./machine.js";
import { sideBySide, tierScope } from "./machine-plan.js";
import { qemuGuest } from "./machine-qemu.js";

const SIDE_BY_SIDE = sideBySide(availableParallelism(), process.env.LIKEN_MACHINE_SIDE_BY_SIDE);
console.log(`machine scenario: ${SIDE_BY_SIDE.why}`);

/**
 * One backend's image build (cached after the first) plus its run, side by side with the other;
 * the run's own deadlines are tighter.
 */
const SCENARIO_TIMEOUT_MS = 2_400_000;

describe("machine scenario", () => {
  (SIDE_BY_SIDE.yes ? it.concurrent : it).each(MACHINE_BOOTLOADERS.map((b) => [b]))(
    "bootloader %s",
    async (bootloader) => {
      const log = (l: string): void => console.log(`[${bootloader}] ${l}`);
      const run = await runMachineScenario({
        bootloader,
        scope: tierScope(bootloader),
        guest: qemuGuest(bootloader, log),
        out: log,
      });
      log(
        `${
          run.problems.length === 0
            ? run.summary
            : `FAILED (${run.problems.join("; ")}); logs in ${run.dir}`
        }; ${acceleratorLine(await accelerator())}`,
      );
      cleanUp(run, false);
      expect(run.problems).toEqual([]);
      expect(processesNaming(run.marks)).toEqual([]);
    },
    SCENARIO_TIMEOUT_MS,
  );
});
