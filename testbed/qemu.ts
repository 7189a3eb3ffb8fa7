// Starting and stopping QEMU for every guest liken boots: the testbed's scenarios, the machine
// scenario and the machine image's smoke boot. One machine: q35 on the accelerator that
// testbed/accelerator.ts chose (TCG unless a guest was seen running under KVM), OVMF with this run's
// copy of its variables, the disk on virtio, the i6300esb watchdog, the serial console as ser0.
//
// None outlives the process that started it: each runs under `timeout` (which ends it even if
// this process dies by SIGKILL), and on exit or a stop signal every QEMU still running is ended
// by pid.
import { spawn, type ChildProcess } from "node:child_process";
import { closeSync, openSync } from "node:fs";
import { join } from "node:path";
import type { AcceleratorName } from "./accelerator.js";

export const OVMF_CODE = "/usr/share/OVMF/OVMF_CODE_4M.fd";
export const OVMF_VARS = "/usr/share/OVMF/OVMF_VARS_4M.fd";

/** Every QEMU this process started and has not stopped yet. */
const running = new Set<ChildProcess>();

// SIGTERM to `timeout`, which passes it on to QEMU (a SIGKILL would orphan QEMU).
function killAll(): void {
  for (const c of running) {
    if (c.pid !== undefined && c.exitCode === null) process.kill(c.pid, "SIGTERM");
  }
  running.clear();
}

let handlersInstalled = false;
/** Installed with the first QEMU, not at import: importing this module changes nothing. */
function installHandlers(): void {
  if (handlersInstalled) return;
  handlersInstalled = true;
  process.once("exit", killAll);
  for (const sig of ["SIGINT", "SIGTERM"] as const) {
    process.once(sig, () => {
      killAll();
      process.exit(sig === "SIGINT" ? 130 : 143);
    });
  }
}

/** Where the serial console (chardev ser0) goes. */
export type QemuSerial =
  /** A unix socket, server=on,wait=on: the guest starts once someone connects. */
  | { serialSocket: string }
  /** A file that QEMU writes the console to. */
  | { serialFile: string };

export type QemuOptions = QemuSerial & {
  /** From `accelerator()`: KVM only once a probe guest ran under it. */
  accel: AcceleratorName;
  /** Where qemu.stderr goes. */
  dir: string;
  disk: string;
  /**
   * The disk is a copy thrown away after the boot: cache=unsafe, its writes need not reach the
   * file before QEMU exits.
   */
  throwawayDisk?: boolean;
  /** This run's copy of the OVMF variable store. */
  vars: string;
  memoryMiB?: number;
  /** Further arguments (a network device). */
  extra?: string[];
  /** Upper bound of QEMU's life in seconds: `timeout` ends it whatever happens here. */
  lifetimeSeconds: number;
  /**
   * The guest's reset (its reboot, a panic's reboot, the watchdog) ends QEMU instead of resetting
   * the machine in place, so that the owner can power it on again: see `PoweredQemu`.
   */
  exitOnReset?: boolean;
};

/** qemu-system-x86_64's arguments for `o`. */
export function qemuArgs(o: QemuOptions): string[] {
  const chardev =
    "serialSocket" in o
      ? `socket,id=ser0,path=${o.serialSocket},server=on,wait=on`
      : `file,id=ser0,path=${o.serialFile}`;
  return [
    "-machine",
    `q35,accel=${o.accel}`,
    "-m",
    String(o.memoryMiB ?? 512),
    "-smp",
    "1",
    "-nodefaults",
    "-no-user-config",
    "-display",
    "none",
    "-drive",
    `if=pflash,format=raw,unit=0,readonly=on,file=${OVMF_CODE}`,
    "-drive",
    `if=pflash,format=raw,unit=1,file=${o.vars}`,
    "-drive",
    `file=${o.disk},format=raw,if=virtio${o.throwawayDisk === true ? ",cache=unsafe" : ""}`,
    // The emulated watchdog resets the machine, as a board's watchdog would.
    "-device",
    "i6300esb",
    "-action",
    "watchdog=reset",
    ...(o.exitOnReset === true ? ["-action", "reboot=shutdown"] : []),
    "-chardev",
    chardev,
    "-serial",
    "chardev:ser0",
    ...(o.extra ?? []),
  ];
}

export function startQemu(o: QemuOptions): ChildProcess {
  // Appended: a guest powered on again keeps what the earlier QEMU said.
  const errFd = openSync(join(o.dir, "qemu.stderr"), "a");
  const child = spawn(
    "timeout",
    ["--kill-after=10", String(o.lifetimeSeconds), "qemu-system-x86_64", ...qemuArgs(o)],
    { stdio: ["ignore", "ignore", errFd] },
  );
  closeSync(errFd);
  installHandlers();
  running.add(child);
  child.once("exit", () => running.delete(child));
  return child;
}

export async function stopQemu(child: ChildProcess): Promise<void> {
  running.delete(child);
  if (child.exitCode !== null || child.signalCode !== null || child.pid === undefined) return;
  const exited = new Promise<void>((r) => child.once("exit", () => r()));
  // `timeout` passes SIGTERM on to QEMU and, --kill-after=10 s later, SIGKILL if it is still up.
  process.kill(child.pid, "SIGTERM");
  await exited;
}
