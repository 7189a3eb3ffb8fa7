// The machine image (testbed/machine/) boots for real: OVMF, GRUB or systemd-boot, Debian's
// kernel, the busybox initrd, systemd, and liken-agent.service reaching READY=1 under
// Type=notify; with no API server behind its address the agent keeps serving, past its
// WatchdogSec, with no restart and no reboot. Both bootloaders boot at once (one core each).
import { describe, expect, it } from "vitest";
import { accelerator, acceleratorLine } from "../../testbed/accelerator.js";
import { buildMachineImages } from "../../testbed/machine/build.js";
import { MACHINE_BOOTLOADERS } from "../../testbed/machine/contract.js";
import { smokeBoot } from "../../testbed/machine/smoke.js";

describe("the machine image", () => {
  it.concurrent.each(MACHINE_BOOTLOADERS.map((b) => [b]))(
    "boots with %s into a serving agent",
    async (bootloader) => {
      const log = (s: string): void => console.log(`[${bootloader}] ${s}`);
      const images = await buildMachineImages(bootloader, log);
      // One agent process seen logging for 65 s, twice its WatchdogSec (30 s) and more: a
      // missing WATCHDOG=1 shows as a new pid or as silence.
      const r = await smokeBoot(images, log);
      log(
        `initrd at ${r.initrdSeconds.toFixed(1)} s, agent READY at ${r.agentReadySeconds.toFixed(1)} s, served ${r.servedSeconds.toFixed(0)} s; ${acceleratorLine(await accelerator())}`,
      );
      expect(r.agentLines.some((l) => /Started liken-agent\.service/.test(l))).toBe(true);
      expect(r.agentLines.some((l) => /"msg":"phase"/.test(l))).toBe(true);
    },
    900_000,
  );
});
