// Picks a bootloader backend by name from the agent's configuration; the only place that knows
// every backend. Errors name the backend so a person knows which configuration to fix.
import { DirEnvStore } from "./envstore.js";
import { EfivarfsDir } from "./efivars.js";
import { BootloaderError } from "./errors.js";
import { GrubBootloader } from "./grub.js";
import { SystemdBootBootloader } from "./systemd-boot.js";
import type { Bootloader } from "./types.js";

export type BootloaderConfig =
  /** envDir: the ESP directory holding grubenv and grubenv2 (e.g. /boot/efi/EFI/liken). */
  | { backend: "grub"; envDir: string }
  /** esp: the ESP mount point; efivars: /sys/firmware/efi/efivars or a stand-in directory. */
  | { backend: "systemd-boot"; esp: string; efivars: string };

export function createBootloader(config: BootloaderConfig): Bootloader {
  const backend = (config as { backend: unknown }).backend;
  switch (config.backend) {
    case "grub":
      return new GrubBootloader(new DirEnvStore(config.envDir));
    case "systemd-boot":
      return new SystemdBootBootloader(config.esp, new EfivarfsDir(config.efivars));
    default: {
      const never: never = config;
      throw new BootloaderError(
        "LIKEN_BOOTLOADER_UNKNOWN_BACKEND",
        `unknown bootloader backend ${JSON.stringify(backend)} in the agent configuration ` +
          `(${JSON.stringify(never)}); use "grub" or "systemd-boot"`,
      );
    }
  }
}

/** Runs a bootloader call and names the backend in any error it throws. */
export async function withBackend<T>(
  bl: Bootloader,
  what: string,
  f: () => Promise<T>,
): Promise<T> {
  try {
    return await f();
  } catch (e) {
    if (e instanceof BootloaderError) {
      throw new BootloaderError(e.code, `${bl.backend}: ${what}: ${e.message}`, {
        retryable: e.retryable,
        context: { ...e.context, backend: bl.backend },
        cause: e,
      });
    }
    throw new BootloaderError(
      "LIKEN_BOOTLOADER_IO",
      `${bl.backend}: ${what} failed: ${String(e)}`,
      {
        retryable: true,
        context: { backend: bl.backend },
        cause: e,
      },
    );
  }
}

export type { Bootloader, BootRecord, BootVerdict, Slot } from "./types.js";
export { judgeBoot, runningSlotFromCmdline, otherSlot } from "./types.js";
export { BootloaderError } from "./errors.js";
