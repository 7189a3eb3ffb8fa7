// npx tsx testbed/machine/main.ts --bootloader grub|systemd-boot [--boot] [--panic] [--keep]
// Builds (or reuses) the machine's images and prints them; --boot also boots the disk under
// QEMU with a dummy identity until the agent runs under systemd (smoke.ts), then stops it. A
// boot that passed removes its folder (/tmp/liken-machine-smoke-*), one that failed keeps its
// logs, and --keep keeps it all (the disk copy, the serial log).
import { parseArgs } from "node:util";
import { buildMachineImages } from "./build.js";
import { MACHINE_BOOTLOADERS, type MachineBootloader } from "./contract.js";

const { values } = parseArgs({
  options: {
    bootloader: { type: "string", default: "grub" },
    boot: { type: "boolean", default: false },
    // systemd-boot only: boot the panicking release and see panic=3 reboot the machine.
    panic: { type: "boolean", default: false },
    keep: { type: "boolean", default: false },
  },
});
const bootloader = values.bootloader as MachineBootloader;
if (!MACHINE_BOOTLOADERS.includes(bootloader)) {
  console.error(`--bootloader ${values.bootloader}: use ${MACHINE_BOOTLOADERS.join(" or ")}`);
  process.exit(2);
}
const t0 = Date.now();
const images = await buildMachineImages(bootloader, (s) => console.error(s));
console.error(`machine: images ready in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
console.log(JSON.stringify(images, null, 2));
if (values.boot) {
  const { smokeBoot } = await import("./smoke.js");
  const r = await smokeBoot(images, (s) => console.error(s), { keep: values.keep });
  console.log(JSON.stringify(r, null, 2));
}
if (values.panic) {
  const { panicBoot } = await import("./smoke.js");
  const s = await panicBoot(images, (line) => console.error(line), { keep: values.keep });
  console.log(JSON.stringify({ panicToNextBootSeconds: s }));
}
