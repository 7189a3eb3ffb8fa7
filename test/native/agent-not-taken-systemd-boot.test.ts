// A trial systemd-boot did not take, seen by the daemon as `liken agent run` builds it: the
// real systemd-boot backend over an ESP directory and an efivarfs stand-in, a file-backed slot
// staged from a loopback channel, the real memory file, and the systemd-boot firmware model
// (src/bootloader/systemd-boot.ts) playing a boot manager that ignores LoaderEntryOneShot. What
// the QEMU guest showed for systemd-boot 252 before the one-shot glob: the machine rebooted and
// booted the default entry with the trial armed.
//
// Played: the API side only, as in agent-daemon-order.test.ts (the watch cache shows the
// Machine and the Cluster with the turn record; status writes are recorded instead of sent);
// two ticks are run with tickOnce(). The reboot command only leaves a mark: the daemon must not run it.
// The GRUB case end to end with the real control plane and operator is
// test/integration/agent-trial-not-taken.test.ts.
import { existsSync, readdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { MemoryFile, MemoryKeeper } from "../../src/agent/memory.js";
import type { MachineStatus } from "../../src/api/types.js";
import {
  ONESHOT,
  SELECTED,
  SystemdBootBootloader,
  systemdBootOnce,
} from "../../src/bootloader/systemd-boot.js";
import { systemdBootEsp } from "../support/esp.js";
import { observed } from "../unit/agent-fixtures.js";
import { armingActions, cluster, playedDaemon, Rebooted, stagedMachine } from "./daemon-machine.js";
import { startReleaseChannel, type ReleaseChannel } from "./release-channel.js";

const OLD = "2026.10.10-001";
const NEW = "2026.10.12-001";
let channel: ReleaseChannel;

beforeAll(async () => {
  channel = await startReleaseChannel("liken-not-taken-", NEW);
});
afterAll(() => channel.close());

it("systemd-boot ignored the one-shot: Failed as TrialNotTaken once, disarmed, no second reboot", async () => {
  const { dir, config } = await stagedMachine(channel, NEW);
  const esp = path.join(dir, "esp");
  const efivars = path.join(dir, "efivars");
  const vars = await systemdBootEsp(esp, efivars);
  const bootId = path.join(dir, "boot_id");
  writeFileSync(bootId, "boot-1\n");
  const rebootMark = path.join(dir, "rebooted");
  const cfg = config({
    bootloader: { backend: "systemd-boot", esp, efivars },
    bootId,
    // A reboot only leaves its mark (and fails, so the tick goes on).
    reboot: { command: ["sh", "-c", `touch ${rebootMark}; exit 1`] },
  });
  const bootloader = new SystemdBootBootloader(esp, vars);

  // The turn, in boot-1: the slot matches, the trial is armed and remembered, "reboot".
  const before = new MemoryKeeper(new MemoryFile(cfg.slots.stateDir));
  await before.load();
  const arming = armingActions({ ...cfg, reboot: { exitCode: 0 } }, bootloader, before);
  const release = { version: NEW, digest: channel.digest };
  await expect(
    arming.checkAndReboot(observed({ bootId: "boot-1" }), "b", release),
  ).rejects.toBeInstanceOf(Rebooted);
  expect(before.now.trial).toMatchObject({ ...release, slot: "b", bootId: "boot-1" });
  expect(await vars.get(ONESHOT)).toBe("liken-b*.conf");

  // boot-2: the boot manager ignores the one-shot and boots the default.
  expect(await systemdBootOnce(esp, vars, { ignoreOneShot: true })).toMatchObject({ slot: "a" });
  writeFileSync(bootId, "boot-2\n");

  const turn = { machine: "m", grantedAt: "2026-12-03T12:00:00Z", grantedBy: "t", leader: false };
  const c = cluster(channel.server.url, release, { rebootTurns: [{ ...turn, ...release }] });
  const writes: MachineStatus[] = [];
  const daemon = playedDaemon(cfg, c, OLD, (s) => {
    writes.push(s);
    return Promise.resolve();
  });

  await daemon.tickOnce();
  expect(writes).toHaveLength(1);
  const first = writes[0]!;
  expect(first.step).toBe("Failed");
  expect(first.lastTrial).toMatchObject({
    ...release,
    slot: "b",
    result: "Failed",
    reason: "TrialNotTaken",
  });
  const message = first.lastTrial?.message ?? "";
  expect(message).toMatch(/^systemd-boot did not take the trial of 2026\.10\.12-001 in slot b/);
  expect(message).toContain(
    `${ONESHOT}=liken-b*.conf ${SELECTED}=liken-a.conf entry liken-b+1-0.conf`,
  );
  expect(message).toContain("bootctl");
  // Disarmed: the one-shot gone, the entry without a counter; nothing left to boot by surprise.
  expect(await vars.get(ONESHOT)).toBeNull();
  expect(readdirSync(path.join(esp, "loader", "entries")).sort()).toEqual([
    "liken-a.conf",
    "liken-b.conf",
  ]);
  expect(await bootloader.read()).toMatchObject({ defaultSlot: "a", armed: null, started: null });
  expect((await new MemoryFile(cfg.slots.stateDir).load()).trial).toBeUndefined();

  // The next look gives the turn back (its uncordon fails here: no API server) and never reboots.
  await daemon.tickOnce();
  expect(writes.at(-1)).toMatchObject({ step: "Failed" });
  expect(writes.at(-1)?.turnRequest).toBeUndefined();
  expect(existsSync(rebootMark)).toBe(false);
  expect((await systemdBootOnce(esp, vars)).slot).toBe("a");
});
