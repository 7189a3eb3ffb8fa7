// A QEMU guest whose every reset is a power cycle. QEMU runs with `-action reboot=shutdown`: when
// the guest resets (its own reboot, a panic's `panic=` reboot, the watchdog), QEMU exits with
// status 0 and is started again on the same disk and the same OVMF variable store, and the serial
// console goes on where it was. What a guest keeps across a reboot is what it keeps across a power
// cycle here (the disk, GRUB's grubenv, systemd-boot's non-volatile EFI variables); what a reset
// clears (volatile EFI variables, memory) is cleared either way.
//
// Why not a warm reset: OVMF under TCG hung once after one, in CI (the firmware cleared the screen
// and printed nothing more for 420 s, so the trial never booted). docs/adr/qemu-power-cycle.md has
// the evidence and what a warm reset would still add.
import { rmSync } from "node:fs";
import type { ChildProcess } from "node:child_process";
import { accelerator } from "../../testbed/accelerator.js";
import { startQemu, stopQemu, type QemuOptions } from "../../testbed/qemu.js";
import { SerialConsole } from "./serial.js";

/** How long QEMU may take to open its serial socket after its start. */
const SOCKET_DEADLINE_MS = 30_000;

export type PoweredOptions = Omit<
  QemuOptions,
  "serialSocket" | "serialFile" | "exitOnReset" | "accel"
> & {
  serialSocket: string;
  serialLog: string;
};

export class PoweredQemu {
  /** Times the guest was powered on again after a reset. */
  powerCycles = 0;
  private child: ChildProcess;
  private stopping = false;
  private readonly until: number;

  private constructor(
    private readonly o: PoweredOptions & Pick<QemuOptions, "accel">,
    readonly serial: SerialConsole,
    child: ChildProcess,
    until: number,
  ) {
    this.child = child;
    this.until = until;
    this.watch(child);
  }

  static async start(options: PoweredOptions): Promise<PoweredQemu> {
    // Probed once per process (testbed/accelerator.ts): TCG unless a guest ran under KVM.
    const o = { ...options, accel: (await accelerator()).name };
    const until = Date.now() + o.lifetimeSeconds * 1000;
    const child = PoweredQemu.launch(o, o.lifetimeSeconds);
    try {
      const serial = await SerialConsole.open(o.serialSocket, o.serialLog, SOCKET_DEADLINE_MS, {
        reopens: true,
      });
      return new PoweredQemu(o, serial, child, until);
    } catch (e) {
      await stopQemu(child);
      throw e;
    }
  }

  private static launch(
    o: PoweredOptions & Pick<QemuOptions, "accel">,
    lifetimeSeconds: number,
  ): ChildProcess {
    // QEMU binds the socket's path afresh; an old one would take our connection first.
    rmSync(o.serialSocket, { force: true });
    return startQemu({ ...o, lifetimeSeconds, exitOnReset: true });
  }

  private watch(child: ChildProcess): void {
    child.once("exit", (code, signal) => {
      if (this.stopping) return;
      if (code !== 0) {
        const how = signal !== null ? `by ${signal}` : `with status ${String(code)}`;
        this.serial.fail(
          new Error(`QEMU exited ${how}, not by a guest reset; see ${this.o.dir}/qemu.stderr`),
        );
        return;
      }
      this.powerOn().catch((e: unknown) => this.serial.fail(e as Error));
    });
  }

  private async powerOn(): Promise<void> {
    const left = Math.floor((this.until - Date.now()) / 1000);
    if (left <= 0) throw new Error("the guest reset after QEMU's lifetime ran out");
    this.powerCycles++;
    this.child = PoweredQemu.launch(this.o, left);
    this.watch(this.child);
    await this.serial.reopen(this.o.serialSocket, SOCKET_DEADLINE_MS);
  }

  async stop(): Promise<void> {
    this.stopping = true;
    this.serial.close();
    await stopQemu(this.child);
  }
}
