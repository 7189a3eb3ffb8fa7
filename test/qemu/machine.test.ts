// The machine scenario (issues 13 and 25): liken-agent under systemd in a QEMU guest that is a
// real Kubernetes node (its kubelet registers the Node), rolled by the real control plane and
// cluster-operator from v1 to v2 (a trial that proves itself on the Node's new bootID, with the
// way to the API server cut during the turn and the drain's pods stopped by the kubelet), to v3
// (a trial that panics and falls back) and to v4 (its kubelet never starts: NodeNotRejoined). One backend at a time: each guest and its control plane keep the
// machine's two cores busy. Nothing a run started may still run afterwards.
import { describe, expect, it } from "vitest";
import { accelerator, acceleratorLine } from "../../images/accelerator.js";
import type { MachineBootloader } from "../../images/machine/contract.js";
import { processesNaming } from "./leftovers.js";
import { cleanUp, runMachineScenario } from "./machine.js";
import { qemuGuest } from "./machine-qemu.js";

/** Both backends the agent can drive, one after the other. */
const BOOTLOADERS: readonly MachineBootloader[] = ["grub", "systemd-boot"];

/** One backend's image build (cached after the first) plus its run; the run's own deadlines are tighter. */
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
