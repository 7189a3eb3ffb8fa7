// A power cut at every write of arming and of disarming a trial, for both bootloaders, with the
// agent's real parts: the real GRUB and systemd-boot backends over an ESP directory (and an
// efivarfs stand-in), the real memory file (agent.json), a file-backed slot staged from a
// loopback channel; the firmware models play the boot after the cut; the daemon (its API side
// played, as in agent-not-taken-systemd-boot.test.ts) looks once in the new boot.
//
// Whatever write the cut lands before, the release is never condemned for it: no Failed step,
// no lastTrial, no failedReleases (the operator's failure brake reads those). A trial the
// machine was never shown to hold is counted (TrialInconclusive, reason TrialNotArmed) and armed
// again within the same turn. The byte-level cuts inside each bootloader write are the unit
// tier's (bootloader-powercut*.test.ts).
import { writeFileSync } from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Actions } from "../../src/agent/act.js";
import type { AgentConfig } from "../../src/agent/config.js";
import {
  bootFilesInstalled,
  drained,
  MemoryFile,
  MemoryKeeper,
  type Memory,
} from "../../src/agent/memory.js";
import { MAX_ARM_ATTEMPTS } from "../../src/agent/arming.js";
import type { MachineStatus } from "../../src/api/types.js";
import { BootloaderError } from "../../src/bootloader/errors.js";
import { errorCode, errorText } from "../../src/errors.js";
import type { EfiVars } from "../../src/bootloader/efivars.js";
import { DiskEntryDir, type EntryDir } from "../../src/bootloader/entry-dir.js";
import { DirEnvStore, type EnvCopy } from "../../src/bootloader/envstore.js";
import { grubBoot } from "../../src/bootloader/firmware.js";
import { GrubBootloader, installGrubEnv } from "../../src/bootloader/grub.js";
import { SystemdBootBootloader, systemdBootOnce } from "../../src/bootloader/systemd-boot.js";
import type { Bootloader, Slot } from "../../src/bootloader/types.js";
import { systemdBootEsp } from "../support/esp.js";
import { observed } from "../unit/agent-fixtures.js";
import { armingActions, cluster, playedDaemon, Rebooted, stagedMachine } from "./daemon-machine.js";
import { startReleaseChannel, type ReleaseChannel } from "./release-channel.js";

const OLD = "2026.10.10-001";
const NEW = "2026.10.12-001";
/** More cuts than either operation has writes: the loop below stops at the first whole run. */
const MAX_WRITES = 12;

class PowerCut extends Error {}

/** The machine's power: write number `cutAt` (0-based) never happens, nor any after it. */
class Power {
  writes = 0;
  constructor(readonly cutAt: number) {}
  write(): void {
    if (this.writes++ >= this.cutAt)
      throw new PowerCut(`the power went before write ${this.cutAt}`);
  }
}

class PoweredMemoryFile extends MemoryFile {
  constructor(
    stateDir: string,
    private readonly power: Power,
  ) {
    super(stateDir);
  }
  override async save(m: Memory): Promise<void> {
    this.power.write();
    await super.save(m);
  }
}

class PoweredEnvStore extends DirEnvStore {
  constructor(
    dir: string,
    private readonly power: Power,
  ) {
    super(dir);
  }
  override async write(copy: EnvCopy, bytes: Buffer): Promise<void> {
    this.power.write();
    await super.write(copy, bytes);
  }
}

function poweredVars(vars: EfiVars, power: Power): EfiVars {
  return {
    get: (n) => vars.get(n),
    set: async (n, v) => {
      power.write();
      await vars.set(n, v);
    },
    delete: async (n) => {
      power.write();
      await vars.delete(n);
    },
  };
}

function poweredDir(dir: EntryDir, power: Power): EntryDir {
  return {
    path: dir.path,
    list: () => dir.list(),
    rename: async (from, to) => {
      power.write();
      await dir.rename(from, to);
    },
    sync: (name) => dir.sync(name),
  };
}

type Backend = "grub" | "systemd-boot";

interface TestMachine {
  cfg: AgentConfig;
  dir: string;
  /** The backend over this machine's ESP, each write first asking `power`. */
  bootloader(power?: Power): Bootloader;
  /** One power-on: the firmware model picks the slot (and consumes the boot-once). */
  powerOn(): Promise<Slot>;
}

let channel: ReleaseChannel;
const release = (): { version: string; digest: string } => ({
  version: NEW,
  digest: channel.digest,
});

beforeAll(async () => {
  channel = await startReleaseChannel("liken-arm-cut-", NEW);
});
afterAll(() => channel.close());

async function machine(backend: Backend, name: string): Promise<TestMachine> {
  const { dir, config } = await stagedMachine(channel, NEW, name);
  writeFileSync(path.join(dir, "boot_id"), "boot-1\n");
  const bootId = path.join(dir, "boot_id");
  const reboot = { command: ["sh", "-c", "exit 1"] };
  if (backend === "grub") {
    const envDir = path.join(dir, "grub");
    await installGrubEnv(envDir, "a");
    const cfg = config({ bootloader: { backend: "grub", envDir }, bootId, reboot });
    return {
      cfg,
      dir,
      bootloader: (power = new Power(Infinity)) =>
        new GrubBootloader(new PoweredEnvStore(envDir, power)),
      powerOn: async () => (await grubBoot(new DirEnvStore(envDir))).slot,
    };
  }
  const esp = path.join(dir, "esp");
  const efivars = path.join(dir, "efivars");
  const vars = await systemdBootEsp(esp, efivars);
  const cfg = config({ bootloader: { backend: "systemd-boot", esp, efivars }, bootId, reboot });
  const entries = new DiskEntryDir(path.join(esp, "loader", "entries"));
  return {
    cfg,
    dir,
    bootloader: (power = new Power(Infinity)) =>
      new SystemdBootBootloader(esp, poweredVars(vars, power), {}, poweredDir(entries, power)),
    powerOn: async () => {
      const b = await systemdBootOnce(esp, vars);
      if (b.slot === null) throw new Error(`booted ${b.id}, not a slot`);
      return b.slot;
    },
  };
}

/** The memory of `m` as its agent keeps it, every save first asking `power`. */
async function memoryOf(m: TestMachine, power = new Power(Infinity)): Promise<MemoryKeeper> {
  const k = new MemoryKeeper(new PoweredMemoryFile(m.cfg.slots.stateDir, power));
  await k.load();
  return k;
}

function actions(m: TestMachine, bootloader: Bootloader, memory: MemoryKeeper): Actions {
  return armingActions({ ...m.cfg, reboot: { exitCode: 0 } }, bootloader, memory);
}

/** Drained in the turn held (as the daemon leaves it before check-and-reboot). */
async function drainedMachine(backend: Backend, name: string): Promise<TestMachine> {
  const m = await machine(backend, name);
  const memory = await memoryOf(m);
  // Staged as the daemon leaves it: systemd-boot's boot files installed (this release has none).
  const installed = (x: Memory): Memory =>
    backend === "systemd-boot" ? bootFilesInstalled(x, "b", release()) : x;
  await memory.update((x) => drained(installed(x), release().digest));
  return m;
}

/** Powers on after the cut, boot `boot`, and has the daemon look once: the status it writes. */
async function lookAfterPowerOn(m: TestMachine, boot: string): Promise<[Slot, MachineStatus]> {
  const slot = await m.powerOn();
  writeFileSync(m.cfg.bootId, `${boot}\n`);
  writeFileSync(m.cfg.cmdline, `liken.slot=${slot}\n`);
  const turn = { machine: "m", grantedAt: "2026-12-03T12:00:00Z", grantedBy: "t", leader: false };
  const c = cluster(channel.server.url, release(), { rebootTurns: [{ ...turn, ...release() }] });
  const writes: MachineStatus[] = [];
  const daemon = playedDaemon(m.cfg, c, OLD, (s) => {
    writes.push(s);
    return Promise.resolve();
  });
  await daemon.tickOnce();
  expect(writes.length).toBeGreaterThan(0);
  return [slot, writes[0]!];
}

/** Never a verdict on the release: what the operator's failure brake reads stays empty. */
function expectNoVerdict(at: string, s: MachineStatus): void {
  expect({ at, step: s.step, lastTrial: s.lastTrial, failed: s.failedReleases }).toEqual({
    at,
    step: "Updating",
    lastTrial: undefined,
    failed: undefined,
  });
}

const BACKENDS: Backend[] = ["grub", "systemd-boot"];

describe("a power cut at every write of arming the trial", () => {
  it.each(BACKENDS)(
    "%s: the trial boots, or the next boot counts it as not armed and arms it again",
    async (backend) => {
      let notArmed = 0;
      let whole = false;
      for (let cutAt = 0; cutAt < MAX_WRITES && !whole; cutAt++) {
        const at = `${backend}, cut before write ${cutAt}`;
        const m = await drainedMachine(backend, `arm-${backend}-${cutAt}`);
        const power = new Power(cutAt);
        const memory = await memoryOf(m, power);
        const ran = await actions(m, m.bootloader(power), memory)
          .checkAndReboot(observed({ bootId: "boot-1" }), "b", release())
          .then(
            () => "returned",
            (e: unknown) => e,
          );
        whole = ran instanceof Rebooted;
        if (!whole && !(ran instanceof PowerCut)) throw new Error(`${at}: ${String(ran)}`);

        const [slot, s] = await lookAfterPowerOn(m, "boot-2");
        expectNoVerdict(at, s);
        if (slot === "b") {
          // The bootloader held the trial and started it: this boot proves it.
          expect({ at, stage: s.updateStage }).toEqual({ at, stage: "Proving" });
          continue;
        }
        const after = await memoryOf(m);
        expect({ at, failed: after.now.failed }).toEqual({ at, failed: [] });
        expect(await m.bootloader().read()).toMatchObject({ armed: null, started: null });
        if (cutAt > 0) {
          // The intent was recorded and never shown armed: counted, and said on the Machine.
          notArmed++;
          const c = s.conditions?.find((x) => x.type === "TrialInconclusive");
          expect({ at, status: c?.status, reason: c?.reason }).toEqual({
            at,
            status: "True",
            reason: "TrialNotArmed",
          });
          expect(c?.message).toContain("attempt 1 of 3");
          expect(after.now.noVerdict).toMatchObject({ reason: "TrialNotArmed", attempts: 1 });
          expect(after.now.trial).toBeUndefined();
        }
        // Armed again within the same turn, and this time shown armed.
        const again = await actions(m, m.bootloader(), after)
          .checkAndReboot(observed({ bootId: "boot-2" }), "b", release())
          .catch((e: unknown) => e);
        expect(again).toBeInstanceOf(Rebooted);
        expect(after.now.trial?.shownAt).toBeDefined();
        expect(after.now.noVerdict).toBeUndefined();
        expect(await m.bootloader().read()).toMatchObject({ armed: "b" });
      }
      expect(whole).toBe(true);
      // At least one cut fell between the intent and the bootloader's read-back.
      expect(notArmed).toBeGreaterThan(0);
    },
    60_000,
  );
});

describe("a power cut at every write of disarming the trial", () => {
  it.each(BACKENDS)(
    "%s: the trial boots, or the next boot finds it withdrawn, never a trial not taken",
    async (backend) => {
      let whole = false;
      let withdrawn = 0;
      for (let cutAt = 0; cutAt < MAX_WRITES && !whole; cutAt++) {
        const at = `${backend}, cut before write ${cutAt}`;
        const m = await drainedMachine(backend, `disarm-${backend}-${cutAt}`);
        const armedBy = await memoryOf(m);
        await expect(
          actions(m, m.bootloader(), armedBy).checkAndReboot(
            observed({ bootId: "boot-1" }),
            "b",
            release(),
          ),
        ).rejects.toBeInstanceOf(Rebooted);
        expect(armedBy.now.trial?.shownAt).toBeDefined();

        const power = new Power(cutAt);
        const memory = await memoryOf(m, power);
        const ran = await actions(m, m.bootloader(power), memory)
          .disarm()
          .then(
            () => "disarmed",
            (e: unknown) => e,
          );
        whole = ran === "disarmed";
        if (!whole && !(ran instanceof PowerCut)) throw new Error(`${at}: ${String(ran)}`);

        const [slot, s] = await lookAfterPowerOn(m, "boot-2");
        expectNoVerdict(at, s);
        if (slot === "b") {
          expect({ at, stage: s.updateStage }).toEqual({ at, stage: "Proving" });
          continue;
        }
        withdrawn++;
        const after = await memoryOf(m);
        expect({ at, failed: after.now.failed, noVerdict: after.now.noVerdict }).toEqual({
          at,
          failed: [],
          noVerdict: undefined,
        });
        expect(s.conditions?.find((x) => x.type === "TrialInconclusive")).toBeUndefined();
      }
      expect(whole).toBe(true);
      expect(withdrawn).toBeGreaterThan(1);
    },
    60_000,
  );
});

describe("an arm that keeps failing (EIO, a read-only or full ESP)", () => {
  it.each(BACKENDS)(
    "%s: counted per attempt, never failed; after the bound the turn is given back and it holds",
    async (backend) => {
      const m = await drainedMachine(backend, `eio-${backend}`);
      const memory = await memoryOf(m);
      // The ESP refuses the arm's writes as the kernel reports them; reads still work.
      const real = m.bootloader();
      const broken: Bootloader = {
        backend: real.backend,
        read: () => real.read(),
        confirm: (s) => real.confirm(s),
        disarm: () => real.disarm(),
        armTrial: () =>
          Promise.reject(
            new BootloaderError("LIKEN_BOOTLOADER_IO", "writing grubenv2 failed: EIO", {
              retryable: true,
            }),
          ),
      };
      for (let attempt = 1; attempt <= MAX_ARM_ATTEMPTS; attempt++) {
        const e = await actions(m, broken, memory)
          .checkAndReboot(observed({ bootId: "boot-1" }), "b", release())
          .catch((x: unknown) => x);
        expect(errorCode(e)).toBe("LIKEN_AGENT_TRIAL_NOT_ARMED");
        expect(errorText(e)).toContain(`attempt ${attempt} of ${MAX_ARM_ATTEMPTS}`);
        expect(errorText(e)).toContain("EIO");
        expect(memory.now.noVerdict).toMatchObject({ reason: "TrialNotArmed", attempts: attempt });
        expect(memory.now.trial).toBeUndefined();
        expect(memory.now.failed).toEqual([]);
        expect(memory.now.lastTrial).toBeUndefined();
      }
      // The daemon's next look: no arm again; the turn given back; the release not failed.
      writeFileSync(m.cfg.cmdline, "liken.slot=a\n");
      const [, s] = await lookAfterPowerOn(m, "boot-1");
      expect(s.step).toBe("Failed");
      expect(s.turnRequest).toBeUndefined();
      expect(s.lastTrial).toBeUndefined();
      expect(s.failedReleases).toBeUndefined();
      const c = s.conditions?.find((x) => x.type === "TrialInconclusive");
      expect(c).toMatchObject({ status: "True", reason: "TrialNotArmed" });
      expect(c?.message).toContain("liken.sh/retry");
      expect(await m.bootloader().read()).toMatchObject({ armed: null, started: null });
    },
    60_000,
  );
});
