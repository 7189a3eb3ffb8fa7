// The testbed's scenarios, played twice: on the real firmware and bootloader under QEMU
// (testbed.ts) and on the firmware model (src/bootloader/firmware.ts). Both drive the same
// agent stand-in below through liken's GRUB backend, and must print the same boot sequence.
import { GrubBootloader } from "../../src/bootloader/grub.js";
import { bootMachine, type TrialFault } from "../../src/bootloader/firmware.js";
import { MemoryEnvStore } from "../../src/bootloader/envstore.js";
import { initialEnvBlock } from "../../src/bootloader/grub.js";
import { VERSIONS } from "../../testbed/build.js";
import { judgeBoot, otherSlot, type BootVerdict, type Slot } from "../../src/bootloader/types.js";

export { VERSIONS };

export type ScenarioName = "good" | "panic" | "hang" | "no-confirm";
export const SCENARIO_NAMES: readonly ScenarioName[] = ["good", "panic", "hang", "no-confirm"];

export interface Scenario {
  /** Which slot-B image the scenario installs: what the new release does on its trial. */
  variant: "good" | "panic" | "hang";
  /** Whether the machine "rejoins" (the host confirms) after a trial boot that came up. */
  rejoins: boolean;
  expected: BootLine[];
  /** The agent's verdict on the last boot. */
  finalVerdict: BootVerdict["kind"];
}

export interface BootLine {
  slot: Slot;
  version: string;
  trial: boolean;
}

const a: BootLine = { slot: "a", version: VERSIONS.a, trial: false };
const bTrial: BootLine = { slot: "b", version: VERSIONS.b, trial: true };
const b: BootLine = { slot: "b", version: VERSIONS.b, trial: false };

export const SCENARIOS: Record<ScenarioName, Scenario> = {
  good: { variant: "good", rejoins: true, expected: [a, bTrial, b], finalVerdict: "steady" },
  panic: {
    variant: "panic",
    rejoins: true,
    expected: [a, bTrial, a],
    finalVerdict: "trial-failed",
  },
  hang: { variant: "hang", rejoins: true, expected: [a, bTrial, a], finalVerdict: "trial-failed" },
  "no-confirm": {
    variant: "good",
    rejoins: false,
    expected: [a, bTrial, a],
    finalVerdict: "trial-failed",
  },
};

export function formatBoot(n: number, l: BootLine): string {
  return `boot ${n}: slot ${l.slot} ${l.version}${l.trial ? " (trial)" : ""}`;
}

/**
 * What the agent does once the OS is up, reduced to the bootloader calls: on the first boot it
 * arms a trial of the other slot (the slot verified: the harness installed it); on the trial
 * boot it confirms if the machine rejoined; after a failed trial it reports and disarms.
 * Returns the verdict and whether the host should reboot the machine now ("reboot"), leave it
 * to its own devices ("wait": a trial that never confirms), or stop ("done").
 */
export async function agentOnUp(
  bl: GrubBootloader,
  running: Slot,
  bootNumber: number,
  rejoins: boolean,
): Promise<{ verdict: BootVerdict; action: "reboot" | "wait" | "done" }> {
  const verdict = judgeBoot(await bl.read(), running);
  switch (verdict.kind) {
    case "steady":
      if (bootNumber === 1) {
        await bl.armTrial(otherSlot(running));
        return { verdict, action: "reboot" };
      }
      return { verdict, action: "done" };
    case "on-trial":
      if (!rejoins) return { verdict, action: "wait" };
      await bl.confirm(verdict.slot);
      return { verdict, action: "reboot" };
    case "trial-failed":
      await bl.disarm();
      return { verdict, action: "done" };
    case "armed":
    case "off-default":
      return { verdict, action: "done" };
    default: {
      const never: never = verdict;
      throw new Error(`unknown verdict ${JSON.stringify(never)}`);
    }
  }
}

export interface ModelRun {
  boots: BootLine[];
  grubLogs: string[];
  finalVerdict: BootVerdict["kind"];
  store: MemoryEnvStore;
}

/** The scenario on the firmware model; `store` starts as the image's env copies. */
export async function runOnModel(s: Scenario, maxBoots = 6): Promise<ModelRun> {
  const init = initialEnvBlock("a");
  const store = new MemoryEnvStore([Buffer.from(init), Buffer.from(init)]);
  const bl = new GrubBootloader(store);
  const faults: Partial<Record<Slot, TrialFault>> = {
    b: s.variant === "good" ? "none" : s.variant,
  };
  const boots: BootLine[] = [];
  const grubLogs: string[] = [];
  let finalVerdict: BootVerdict["kind"] = "steady";
  for (let n = 1; n <= maxBoots; n++) {
    const boot = await bootMachine(store, faults);
    boots.push({ slot: boot.slot, version: VERSIONS[boot.slot], trial: boot.trial });
    grubLogs.push(boot.log);
    if (boot.outcome !== "up") continue; // panic= or the watchdog resets it
    const { verdict, action } = await agentOnUp(bl, boot.slot, n, s.rejoins);
    finalVerdict = verdict.kind;
    if (action === "done") break;
    // "reboot": the agent reboots; "wait": the trial's watchdog deadline resets it.
  }
  return { boots, grubLogs, finalVerdict, store };
}
