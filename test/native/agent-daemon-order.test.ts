// The daemon's own loop order after a trial fell back (RECORD_BEFORE_REPORT in
// src/agent/daemon.ts): the failed trial is saved before the status says so. agent-order.test.ts
// checks the fall-back action itself; this file checks that the daemon's tick runs that action
// before it writes the status, so the first status that says Failed already says why.
//
// Real parts: the daemon as `liken agent run` builds it (its Actions, its Observer, the real GRUB
// environment block, a file-backed slot staged from a loopback channel, the real memory file),
// booted by the GRUB firmware model (src/bootloader/firmware.ts) through a trial that panicked.
// Played: the API side only, handed to the daemon through DaemonOptions.apiSide. The watch cache
// (ApiView) shows one Machine and its Cluster as reachable, and the status write is recorded
// with what the memory file held on disk at that moment instead of being sent; one tick is run
// with tickOnce(). The same rule end to end, with a real
// API server, is test/integration/agent-trial.test.ts (minutes); this fails in well under a
// second.
import { afterAll, beforeAll, expect, it } from "vitest";
import { mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { MemoryFile, MemoryKeeper, type Memory } from "../../src/agent/memory.js";
import type { MachineStatus } from "../../src/api/types.js";
import { ENV_FILES, DirEnvStore } from "../../src/bootloader/envstore.js";
import { grubBoot } from "../../src/bootloader/firmware.js";
import { GrubBootloader, initialEnvBlock } from "../../src/bootloader/grub.js";
import { observed } from "../unit/agent-fixtures.js";
import { armingActions, cluster, playedDaemon, Rebooted, stagedMachine } from "./daemon-machine.js";
import { startReleaseChannel, type ReleaseChannel } from "./release-channel.js";

const OLD = "2026.10.10-001";
const NEW = "2026.10.12-001";
let channel: ReleaseChannel;

beforeAll(async () => {
  channel = await startReleaseChannel("liken-daemon-order-", NEW);
});
afterAll(() => channel.close());

it("a trial that fell back is saved before the first status that reports it", async () => {
  const { dir, config } = await stagedMachine(channel, NEW);
  const esp = path.join(dir, "grub");
  mkdirSync(esp, { recursive: true });
  for (const f of ENV_FILES) writeFileSync(path.join(esp, f), initialEnvBlock("a"));
  const cfg = config({ bootloader: { backend: "grub", envDir: esp } });

  // The turn: the slot reads back and matches, the trial is armed and remembered, "reboot".
  const memFile = new MemoryFile(cfg.slots.stateDir);
  const before = new MemoryKeeper(memFile);
  await before.load();
  const arming = armingActions(cfg, new GrubBootloader(new DirEnvStore(esp)), before);
  const release = { version: NEW, digest: channel.digest };
  await expect(arming.checkAndReboot(observed(), "b", release)).rejects.toBeInstanceOf(Rebooted);
  // GRUB boots the trial of b once, the kernel panics, GRUB boots the default a again.
  expect(await grubBoot(new DirEnvStore(esp))).toMatchObject({ slot: "b", trial: true });
  expect(await grubBoot(new DirEnvStore(esp))).toMatchObject({ slot: "a", trial: false });

  // The daemon, started after that boot; its API side played (see the header).
  const writes: { status: MachineStatus; onDisk: Memory }[] = [];
  const daemon = playedDaemon(cfg, cluster(channel.server.url, release), OLD, async (s) => {
    writes.push({ status: s, onDisk: await memFile.load() });
  });

  const started = Date.now();
  await daemon.tickOnce();
  const ms = Date.now() - started;

  // One status for the tick, and it carries the verdict with its reason, saved before.
  expect(writes).toHaveLength(1);
  const first = writes[0]!;
  expect(first.onDisk.failed).toMatchObject([{ ...release, reason: "TrialFellBack" }]);
  expect(first.onDisk.lastTrial).toMatchObject({ ...release, result: "Failed" });
  expect(first.status.lastTrial).toMatchObject({
    ...release,
    result: "Failed",
    reason: "TrialFellBack",
  });
  expect(ms).toBeLessThan(10_000);
});
