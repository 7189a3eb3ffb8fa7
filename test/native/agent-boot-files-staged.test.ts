// systemd-boot's boot files are part of staging: the daemon, as `liken agent run` builds it,
// installs a staged release's kernel and initrd on the ESP before it asks for a turn, and a
// release the ESP has no room for fails on this machine with the node still serving: Failed
// with the code, no turn asked, nothing on the ESP changed, not tried again at the next look.
//
// Real: the systemd-boot backend over an ESP directory (for the full ESP, a 256 KiB tmpfs: the
// test runs as root, as the agent does) and an efivarfs stand-in, a file-backed slot staged
// from a loopback channel whose release carries `kernel` and `initrd`, the memory file.
// Played: the API side only (daemon-machine.ts): the watch cache shows the Machine and the
// Cluster without a turn; status writes are handed to the test. Ticks are run by hand.
import { execFileSync } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { afterEach, beforeEach, expect, it } from "vitest";
import { MemoryFile } from "../../src/agent/memory.js";
import type { MachineStatus } from "../../src/api/types.js";
import { EfivarfsDir } from "../../src/bootloader/efivars.js";
import { cluster, playedDaemon, stagedMachine } from "./daemon-machine.js";
import { startReleaseChannel, type ReleaseChannel } from "./release-channel.js";

const KiB = 1024;
const OLD = "2026.10.10-001";
const NEW = "2026.10.12-001";
const kernel = randomBytes(300 * KiB + 3);
const initrd = randomBytes(100 * KiB + 5);
let channel: ReleaseChannel;

// One machine per test (stagedMachine's directory is the channel's).
beforeEach(async () => {
  channel = await startReleaseChannel("liken-boot-staged-", NEW, { kernel, initrd });
});
afterEach(() => channel.close());

const sha = (b: Buffer): string => `sha256:${createHash("sha256").update(b).digest("hex")}`;

/** Every file under the ESP with its bytes' digest. */
function snapshot(esp: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const e of readdirSync(esp, { withFileTypes: true, recursive: true })) {
    if (e.isFile()) {
      const p = path.join(e.parentPath, e.name);
      out[p.slice(esp.length)] = sha(readFileSync(p));
    }
  }
  return out;
}

const ENTRY = (s: string): string =>
  `title liken ${s}\nlinux /liken/${s}/vmlinuz\ninitrd /liken/${s}/initrd.img\noptions x\n`;

/**
 * Slot b staged with NEW (kernel and initrd included), an ESP with both slots' old boot files
 * and entries (`mountEsp` runs on the ESP directory first), and the daemon with the API played.
 */
async function machine(mountEsp?: (esp: string) => void) {
  const { dir, config } = await stagedMachine(channel, NEW);
  const esp = path.join(dir, "esp");
  const efivars = path.join(dir, "efivars");
  mkdirSync(esp, { recursive: true });
  mountEsp?.(esp);
  mkdirSync(path.join(esp, "loader", "entries"), { recursive: true });
  mkdirSync(efivars, { recursive: true });
  for (const s of ["a", "b"]) {
    mkdirSync(path.join(esp, "liken", s), { recursive: true });
    writeFileSync(path.join(esp, "liken", s, "vmlinuz"), `old kernel ${s}`);
    writeFileSync(path.join(esp, "liken", s, "initrd.img"), `old initrd ${s}`);
    writeFileSync(path.join(esp, "loader", "entries", `liken-${s}.conf`), ENTRY(s));
  }
  await new EfivarfsDir(efivars).set("LoaderEntryDefault", "liken-a.conf");
  const rebootMark = path.join(dir, "rebooted");
  const cfg = config({
    bootloader: { backend: "systemd-boot", esp, efivars },
    reboot: { command: ["sh", "-c", `touch ${rebootMark}; exit 1`] },
  });
  const release = { version: NEW, digest: channel.digest };
  const writes: { status: MachineStatus; esp: Record<string, string> }[] = [];
  const daemon = playedDaemon(cfg, cluster(channel.server.url, release), OLD, (s) => {
    // What the ESP held when this status went out: the turn is asked for by this write.
    writes.push({ status: s, esp: snapshot(esp) });
    return Promise.resolve();
  });
  const memory = async () => await new MemoryFile(cfg.slots.stateDir).load();
  return { esp, release, writes, daemon, memory, rebootMark };
}

it("staging installs the kernel and initrd on the ESP before the turn is asked for", async () => {
  const { esp, release, writes, daemon, memory, rebootMark } = await machine();
  const slotA = { a: snapshot(path.join(esp, "liken", "a")), entry: ENTRY("a") };

  await daemon.tickOnce();
  const asked = writes.filter((w) => w.status.turnRequest !== undefined);
  expect(asked.length).toBeGreaterThan(0);
  expect(asked[0]!.status.turnRequest).toMatchObject(release);
  // When the first status that asks for the turn was written, slot b's files were the release's.
  expect(asked[0]!.esp).toMatchObject({
    "/liken/b/vmlinuz": sha(kernel),
    "/liken/b/initrd.img": sha(initrd),
  });
  expect(readFileSync(path.join(esp, "loader/entries/liken-b.conf"), "utf8")).toBe(ENTRY("b"));
  expect((await memory()).bootFiles).toEqual({ slot: "b", digest: release.digest });
  // The running slot's boot as it was.
  expect(snapshot(path.join(esp, "liken", "a"))).toEqual(slotA.a);
  expect(readFileSync(path.join(esp, "loader/entries/liken-a.conf"), "utf8")).toBe(slotA.entry);
  expect(existsSync(rebootMark)).toBe(false);
});

it("an ESP without room for them: Failed with the code, no turn asked, the ESP unchanged", async () => {
  let mounted = "";
  try {
    const { esp, release, writes, daemon, memory, rebootMark } = await machine((dir) => {
      execFileSync("mount", ["-t", "tmpfs", "-o", "size=256k", "liken-test-esp", dir]);
      mounted = dir;
    });
    const before = snapshot(esp);

    await daemon.tickOnce();
    const last = writes.at(-1)!.status;
    expect(last.step).toBe("Failed");
    expect(last.lastTrial).toMatchObject({
      ...release,
      slot: "b",
      result: "Skipped",
      reason: "BootFilesRefused",
    });
    expect(last.lastTrial?.message).toContain("[LIKEN_BOOTLOADER_ESP_FULL]");
    expect(last.lastTrial?.message).toContain("free space on the ESP");
    expect(last.failedReleases).toEqual([expect.objectContaining(release)]);
    expect(writes.every((w) => w.status.turnRequest === undefined)).toBe(true);
    expect(snapshot(esp)).toEqual(before);

    // The next look stays Failed and asks for nothing: no retry at every look.
    const at = last.lastTrial?.at;
    await daemon.tickOnce();
    expect(writes.at(-1)!.status).toMatchObject({ step: "Failed" });
    expect(writes.every((w) => w.status.turnRequest === undefined)).toBe(true);
    expect((await memory()).lastTrial?.at).toBe(at);
    expect(snapshot(esp)).toEqual(before);
    expect(existsSync(rebootMark)).toBe(false);
  } finally {
    if (mounted !== "") execFileSync("umount", [mounted]);
  }
});
