// `npm run testbed -- --scenario machine --bootloader grub|systemd-boot [--guest qemu|lab]
// [--scope whole|bootloader|turn|kubelet-down] [--no-cut] [--keep]`: the machine scenario from the command line (testbed.ts dispatches here).
import { accelerator, acceleratorLine } from "../../testbed/accelerator.js";
import { MACHINE_BOOTLOADERS, type MachineBootloader } from "../../testbed/machine/contract.js";
import { cleanUp, LAB_GUEST, runMachineScenario, type GuestStarter } from "./machine.js";
import { qemuGuest } from "./machine-qemu.js";
import { processesNaming } from "./leftovers.js";
import { MACHINE_SCOPES, type MachineScope } from "./machine-plan.js";

function value(argv: string[], flag: string): string | undefined {
  const i = argv.indexOf(flag);
  return i >= 0 ? argv[i + 1] : undefined;
}

export async function machineMain(argv: string[]): Promise<number> {
  const bl = value(argv, "--bootloader") ?? "grub";
  if (!MACHINE_BOOTLOADERS.includes(bl as MachineBootloader)) {
    console.error(
      `--bootloader must be one of ${MACHINE_BOOTLOADERS.join(", ")} (got ${bl}); for example: npm run testbed -- --scenario machine --bootloader grub`,
    );
    return 2;
  }
  const bootloader = bl as MachineBootloader;
  const scope = value(argv, "--scope") ?? "whole";
  if (!MACHINE_SCOPES.includes(scope as MachineScope)) {
    console.error(
      `--scope must be one of ${MACHINE_SCOPES.join(", ")} (got ${scope}): whole is every proof, bootloader only the trial, its promotion and the fallback, turn adds the v2 turn's drain, DRA order, API cut and adaptive download, kubelet-down the release whose kubelet never starts (docs/machine-scenario.md, "What each run proves")`,
    );
    return 2;
  }
  const kind = value(argv, "--guest") ?? "qemu";
  let guest: GuestStarter;
  if (kind === "qemu") guest = qemuGuest(bootloader, (l) => console.log(l));
  else if (kind === "lab") guest = LAB_GUEST;
  else {
    console.error(`--guest must be qemu (the real guest) or lab (the lab's stand-in); got ${kind}`);
    return 2;
  }
  const run = await runMachineScenario({
    bootloader,
    guest,
    scope: scope as MachineScope,
    cutApi: !argv.includes("--no-cut"),
    out: (l) => console.log(l),
  });
  const left = processesNaming(run.marks);
  if (left.length > 0)
    run.problems.push(`still running after the scenario:\n    ${left.join("\n    ")}`);
  const ok = run.problems.length === 0;
  cleanUp(run, argv.includes("--keep"));
  // The last line names the accelerator, as the tier's does (machine.test.ts).
  const accel = acceleratorLine(await accelerator());
  if (!ok) {
    for (const p of run.problems) console.log(`  ${p}`);
    console.log(
      `machine scenario FAILED in ${run.seconds.toFixed(1)} s; files in ${run.dir}; ${accel}`,
    );
    return 1;
  }
  if (argv.includes("--keep")) console.log(`files kept in ${run.dir}`);
  console.log(`${run.summary}; ${accel}`);
  return 0;
}
