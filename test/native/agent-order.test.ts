// Fast guards for the agent's ordering, on real files: a real staged slot (downloaded from a
// loopback server into a file-backed slot), the real GRUB environment block in a directory, the
// real memory file. Only the reboot is played (reboot.exitCode: the exit is caught here).
//   - check-and-reboot: no trial is armed unless the slot read back and matched; a mismatch
//     reboots without the trial, remembered as failed BEFORE the status says so;
//   - fall-back: the failed trial is on disk before anything can report it.
// Each case takes well under a second; the integration tests cover the same rules end to end.
import { afterAll, beforeAll, beforeEach, expect, it } from "vitest";
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { Actions } from "../../src/agent/act.js";
import { MemoryFile, MemoryKeeper, type Memory } from "../../src/agent/memory.js";
import { ENV_FILES, DirEnvStore } from "../../src/bootloader/envstore.js";
import { GrubBootloader, initialEnvBlock } from "../../src/bootloader/grub.js";
import type { SlotName } from "../../src/slots/config.js";
import type { Marker, MarkerEvent } from "../../src/slots/marker.js";
import { SlotStore } from "../../src/slots/store.js";
import { observed } from "../unit/agent-fixtures.js";
import { armingActions, Rebooted, stagedMachine } from "./daemon-machine.js";
import { startReleaseChannel, type ReleaseChannel } from "./release-channel.js";

const VERSION = "2.0";
let channel: ReleaseChannel;
let digest = "";

beforeAll(async () => {
  channel = await startReleaseChannel("liken-order-", VERSION);
  ({ digest } = channel);
});
afterAll(() => channel.close());

/** A slot store that notes what the memory file holds when a slot transition begins. */
class WatchedStore extends SlotStore {
  readonly memoryAtTransition: (Memory | undefined)[] = [];

  override async transition(slot: SlotName, e: MarkerEvent): Promise<Marker> {
    const file = path.join(this.config.stateDir, "agent.json");
    this.memoryAtTransition.push(
      existsSync(file) ? (JSON.parse(readFileSync(file, "utf8")) as Memory) : undefined,
    );
    return super.transition(slot, e);
  }
}

interface Machine {
  dir: string;
  actions: Actions;
  bootloader: GrubBootloader;
  memory: MemoryKeeper;
  store: WatchedStore;
  /** What the memory file held, on disk, each time the status before a reboot was written. */
  reports: { reason: string; onDisk: Memory }[];
}

let n = 0;
/** A machine running slot a, with `VERSION` downloaded, verified and staged in slot b. */
async function machine(): Promise<Machine> {
  const { dir, config } = await stagedMachine(channel, VERSION, `m${n++}`);
  mkdirSync(path.join(dir, "grub"), { recursive: true });
  for (const f of ENV_FILES) writeFileSync(path.join(dir, "grub", f), initialEnvBlock("a"));
  const cfg = config({ cmdline: path.join(dir, "no-cmdline") });
  const memFile = new MemoryFile(cfg.slots.stateDir);
  const memory = new MemoryKeeper(memFile);
  await memory.load();
  const bootloader = new GrubBootloader(new DirEnvStore(path.join(dir, "grub")));
  const reports: Machine["reports"] = [];
  const store = new WatchedStore(cfg.slots);
  const actions = armingActions(cfg, bootloader, memory, {
    store,
    reportRebooting: async (reason) => {
      reports.push({ reason, onDisk: await memFile.load() });
    },
  });
  return { dir, actions, bootloader, memory, store, reports };
}

const release = (): { version: string; digest: string } => ({ version: VERSION, digest });
let m: Machine;
beforeEach(async () => {
  m = await machine();
});

it("arms the trial of a slot that read back and matched, recorded before it reports", async () => {
  await expect(m.actions.checkAndReboot(observed(), "b", release())).rejects.toBeInstanceOf(
    Rebooted,
  );
  expect(await m.bootloader.read()).toMatchObject({ armed: "b", started: null });
  expect(m.reports).toHaveLength(1);
  expect(m.reports[0]!.onDisk.trial).toMatchObject({ ...release(), slot: "b" });
  expect(m.reports[0]!.onDisk.failed).toEqual([]);
});

it("arms no trial when one byte of the slot reads back wrong, and saves the failure before it reports", async () => {
  const b = path.join(m.dir, "b.img");
  const bytes = readFileSync(b);
  bytes[4096 + 17] = bytes[4096 + 17]! ^ 0xff; // inside the rootfs artifact
  writeFileSync(b, bytes);
  await expect(m.actions.checkAndReboot(observed(), "b", release())).rejects.toBeInstanceOf(
    Rebooted,
  );
  // No trial: the next boot is the running slot's.
  expect(await m.bootloader.read()).toMatchObject({ defaultSlot: "a", armed: null, started: null });
  expect(m.reports).toHaveLength(1);
  expect(m.reports[0]!.reason).toMatch(/^without the trial: slot b does not match/);
  // On disk before the status said so: failed for good, and the skipped trial with its reason.
  const disk = m.reports[0]!.onDisk;
  expect(disk.trial).toBeUndefined();
  expect(disk.failed).toMatchObject([{ ...release(), reason: "SlotCheckMismatch" }]);
  expect(disk.lastTrial).toMatchObject({ ...release(), result: "Skipped" });
});

it("falls back: the failed trial is on disk before the slot is withdrawn and before any status reads it", async () => {
  await expect(m.actions.checkAndReboot(observed(), "b", release())).rejects.toBeInstanceOf(
    Rebooted,
  );
  // The trial boot failed: the machine came back on slot a (what observe() then sees).
  await m.actions.fallBack(
    observed({
      boot: { kind: "trial-failed", slot: "b", running: "a" },
      other: { slot: "b", state: "staged", release: release() },
    }),
    "b",
  );
  // Remembered first: when the slot's withdrawal began, the record was already on disk.
  expect(m.store.memoryAtTransition).toHaveLength(1);
  expect(m.store.memoryAtTransition[0]?.lastTrial).toMatchObject({ result: "Failed" });
  const disk = await new MemoryFile(path.join(m.dir, "state")).load();
  expect(disk.failed).toMatchObject([{ ...release(), reason: "TrialFellBack" }]);
  expect(disk.lastTrial).toMatchObject({ ...release(), result: "Failed", reason: "TrialFellBack" });
  expect(m.memory.now).toEqual(disk); // what the next status reads is what is saved
});

it("a memory that cannot be saved is not what the status reads", async () => {
  rmSync(path.join(m.dir, "state"), { recursive: true, force: true });
  writeFileSync(path.join(m.dir, "state"), "not a directory");
  const before = m.memory.now;
  await expect(
    m.actions.fallBack(observed({ boot: { kind: "trial-failed", slot: "b", running: "a" } }), "b"),
  ).rejects.toThrow();
  expect(m.memory.now).toBe(before);
});
