// The firmware model: what OVMF + GRUB + the grub.cfg of grub-cfg.ts do at each boot, played
// step by step on the SAME bytes the GRUB backend writes (an EnvStore). The lab and the fleet
// tests boot their simulated machines with it; test/qemu runs the same scenarios on the real
// firmware and bootloader and checks that both give the same boot sequence.
import type { EnvCopy, EnvStore } from "./envstore.js";
import { ENV_FILES } from "./envstore.js";
import { envSet, getEnv, grubIterate, type EnvVar } from "./grubenv.js";
import { V } from "./grub.js";
import { isSlot, type Slot } from "./types.js";

export interface GrubBoot {
  slot: Slot;
  /** True when GRUB consumed next_entry and boots the trial entry (panic=, watchdog). */
  trial: boolean;
  /** The copy grub.cfg used, or null when neither was valid (GRUB then boots slot a). */
  envCopy: EnvCopy | null;
  /** What grub.cfg echoes on the console, for comparison with the testbed's serial log. */
  log: string;
}

/** `load_env --file F names...`: only the whitelisted names, null if GRUB refuses the file. */
function loadEnv(bytes: Buffer | null, names: readonly string[]): Map<string, string> | null {
  if (bytes === null) return null;
  const vars: EnvVar[] | null = grubIterate(bytes);
  if (vars === null) return null;
  const out = new Map<string, string>();
  for (const n of names) {
    const v = getEnv(vars, n);
    if (v !== undefined) out.set(n, v);
  }
  return out;
}

/** `for liken_f in grubenv2 grubenv`: the later copy whose markers agree wins. */
async function currentEnvCopy(store: EnvStore): Promise<EnvCopy | null> {
  let envCopy: EnvCopy | null = null;
  for (const c of [1, 0] as const) {
    const m = loadEnv(await store.read(c), [V.seq, V.end]);
    const seq = m?.get(V.seq) ?? "";
    if (m !== null && seq !== "" && seq === (m.get(V.end) ?? "")) envCopy = c;
  }
  return envCopy;
}

/**
 * `save_env --file F next_entry liken_trial`: both set, in that order, on the file's bytes and
 * written back in place. False when GRUB could not (the trial must then not boot).
 */
async function recordTrialStart(
  store: EnvStore,
  copy: EnvCopy,
  bytes: Buffer,
  slot: Slot,
): Promise<boolean> {
  try {
    await store.write(copy, envSet(envSet(bytes, V.next, ""), V.trial, slot));
    return true;
  } catch {
    return false;
  }
}

/** How the bootloader differs from the one liken installs, as a test or the lab declares it. */
export interface FirmwareQuirks {
  /**
   * The bootloader does not honour the boot-once entry: GRUB's `save_env` cannot write the
   * environment (it sits where GRUB cannot write, or a locked-down GRUB refuses), so grub.cfg
   * leaves next_entry armed and boots the default, as it does for any failed save_env.
   */
  ignoreOneShot?: boolean;
}

/** One boot: the grub.cfg program, statement by statement. */
export async function grubBoot(store: EnvStore, quirks: FirmwareQuirks = {}): Promise<GrubBoot> {
  const envCopy = await currentEnvCopy(store);
  let slot: Slot = "a";
  let trial = false;
  if (envCopy !== null) {
    const bytes = await store.read(envCopy);
    const m = loadEnv(bytes, [V.saved, V.next, V.trial]);
    if (m?.get(V.saved) === "b") slot = "b";
    const next = m?.get(V.next);
    if (
      bytes !== null &&
      isSlot(next) &&
      quirks.ignoreOneShot !== true &&
      (await recordTrialStart(store, envCopy, bytes, next))
    ) {
      slot = next;
      trial = true;
    }
  }
  const env = envCopy === null ? "" : `.../${ENV_FILES[envCopy]}`;
  const def = trial ? `trial-${slot}` : slot;
  return {
    slot,
    trial,
    envCopy,
    log: `liken-grub: env=${env} default=${def} boot=${trial ? "trial" : "normal"}`,
  };
}

/** What a slot's release does on its trial boot, as the harness declares it. */
export type TrialFault = "none" | "panic" | "hang";

export interface MachineBoot extends GrubBoot {
  /**
   * "up": the OS started (the agent runs); "panicked": the kernel panicked and `panic=N`
   * reboots it; "hung": nothing runs and the watchdog armed for the trial resets it.
   */
  outcome: "up" | "panicked" | "hung";
}

/**
 * One power-on or reset of a simulated machine: GRUB picks the slot, then the slot's release
 * either comes up or fails. Faults show on trial boots only: a release that failed its trial is
 * never booted again without a new trial.
 */
export async function bootMachine(
  store: EnvStore,
  faults: Partial<Record<Slot, TrialFault>>,
  quirks: FirmwareQuirks = {},
): Promise<MachineBoot> {
  const boot = await grubBoot(store, quirks);
  const fault = boot.trial ? (faults[boot.slot] ?? "none") : "none";
  switch (fault) {
    case "none":
      return { ...boot, outcome: "up" };
    case "panic":
      return { ...boot, outcome: "panicked" };
    case "hang":
      return { ...boot, outcome: "hung" };
    default: {
      const never: never = fault;
      throw new Error(`unknown fault ${String(never)}`);
    }
  }
}
