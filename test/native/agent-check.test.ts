// The agent's check-and-reboot action with its real parts: file-backed slots read back through
// the addon, the GRUB backend over a directory, the memory file. Only the API (the turn record)
// and the reboot itself are stand-ins. What it guards: a failure to look (a slot not staged, a
// turn that cannot be read) changes nothing and is retried; only bytes that read back wrong
// remember the release as failed and reboot without the trial.
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { open } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { Actions } from "../../src/agent/act.js";
import type { AgentConfig } from "../../src/agent/config.js";
import { MemoryFile, MemoryKeeper } from "../../src/agent/memory.js";
import type { Look } from "../../src/agent/look.js";
import { DEFAULT_TIMEOUTS } from "../../src/agent/steps.js";
import { API_ERROR_CODES, ApiError } from "../../src/api/errors.js";
import type { RebootTurn } from "../../src/api/types.js";
import { createBootloader } from "../../src/bootloader/index.js";
import { ENV_FILES } from "../../src/bootloader/envstore.js";
import { initialEnvBlock } from "../../src/bootloader/grub.js";
import { buildRelease } from "../../src/release/build.js";
import { SlotStore } from "../../src/slots/store.js";
import { digestOf } from "../../src/verify/digest.js";
import { armingActions } from "./daemon-machine.js";

/** What exit() throws: the machine would reboot here. */
class Rebooted extends Error {
  constructor(readonly code: number) {
    super(`rebooted with exit code ${code}`);
  }
}

const FORBIDDEN = new ApiError(API_ERROR_CODES.forbidden, "get Cluster lab: forbidden (HTTP 403)");

interface Machine {
  dir: string;
  cfg: AgentConfig;
  store: SlotStore;
  memory: MemoryKeeper;
  actions: Actions;
  release: { version: string; digest: string };
  bootloader: ReturnType<typeof createBootloader>;
}

let dir: string;
/** Every wait the actions asked for, in ms. */
let paused: number[];
beforeEach(() => {
  paused = [];
  dir = mkdtempSync(path.join(tmpdir(), "liken-agent-check-"));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const TURN: RebootTurn = {
  machine: "m",
  grantedAt: "2026-12-07T00:00:00Z",
  grantedBy: "test",
  leader: false,
  version: "v",
};

/** A machine running slot a, with `stage` deciding what slot b holds. */
async function machine(
  turn: Look<boolean>,
  stage: "empty" | "staged" | "tampered",
  opts: { slotCheckMs?: number; kernelBytes?: number; reboot?: string[] } = {},
): Promise<Machine> {
  const esp = path.join(dir, "esp");
  const state = path.join(dir, "state");
  mkdirSync(esp);
  mkdirSync(state);
  for (const f of ENV_FILES) writeFileSync(path.join(esp, f), initialEnvBlock("a"));
  const slots = {
    slots: { a: { device: path.join(dir, "a.img") }, b: { device: path.join(dir, "b.img") } },
    stateDir: state,
    cmdline: path.join(dir, "cmdline"),
    file: path.join(dir, "agent.yaml"),
  };
  const kernelBytes = opts.kernelBytes ?? 64 * 1024;
  for (const s of ["a", "b"] as const)
    writeFileSync(slots.slots[s].device, Buffer.alloc(kernelBytes + (1 << 20)));
  const cfg = {
    file: slots.file,
    slots,
    machine: "m1",
    cluster: "lab",
    nodeName: "m1",
    bootloader: { backend: "grub", envDir: esp },
    driverPods: {},
    cmdline: slots.cmdline,
    bootId: "/proc/sys/kernel/random/boot_id",
    reboot: opts.reboot ? { command: opts.reboot } : { exitCode: 194 },
    heartbeatMs: 10_000,
    loopMs: 1_000,
    direct: false,
    timeouts: {
      ...DEFAULT_TIMEOUTS,
      slotCheckMs: opts.slotCheckMs ?? DEFAULT_TIMEOUTS.slotCheckMs,
    },
  } satisfies AgentConfig;
  const store = new SlotStore(slots);
  const release = await stageInto(store, slots.slots.b.device, stage, kernelBytes);
  const memory = new MemoryKeeper(new MemoryFile(state));
  await memory.load();
  const bootloader = createBootloader(cfg.bootloader);
  // The daemon's parts for a turn that arms a trial, but this test's turn record, its waits
  // noted, and the reboot's exit code kept.
  const actions = armingActions(cfg, bootloader, memory, {
    store,
    // The record's fields do not matter here, only whether there is one (and no drain pause).
    turnHeld: () =>
      Promise.resolve(turn.ok ? { ok: true, value: turn.value ? TURN : undefined } : turn),
    pause: (ms) => {
      paused.push(ms);
      return Promise.resolve();
    },
    exit: (code) => {
      throw new Rebooted(code);
    },
  });
  return { dir, cfg, store, memory, actions, release, bootloader };
}

/** Writes a one-artifact release into slot b and stages it (or leaves b empty). */
async function stageInto(
  store: SlotStore,
  device: string,
  stage: "empty" | "staged" | "tampered",
  kernelBytes: number,
): Promise<{ version: string; digest: string }> {
  const kernel = randomBytes(kernelBytes);
  const src = path.join(dir, "kernel.img");
  writeFileSync(src, kernel);
  const channel = path.join(dir, "channel");
  await buildRelease({
    version: "2.0",
    out: channel,
    artifacts: [{ name: "kernel", file: src }],
  });
  const doc = readFileSync(path.join(channel, "2.0", "release.yaml"));
  const release = { version: "2.0", digest: digestOf(doc) };
  if (stage === "empty") return release;
  const bytes = Buffer.from(kernel);
  if (stage === "tampered") bytes[100] = (bytes[100] ?? 0) ^ 0xff;
  const fh = await open(device, "r+");
  await fh.write(bytes, 0, bytes.length, 0);
  await fh.close();
  await store.transition("b", { type: "withdraw" });
  await store.writeRelease("b", doc);
  await store.transition("b", { type: "begin", version: "2.0", releaseDigest: release.digest });
  await store.transition("b", { type: "staged", verifiedAt: new Date().toISOString() });
  return release;
}

/** check-and-reboot of slot b; what it threw, if anything. */
async function check(m: Machine): Promise<unknown> {
  const o = { running: { slot: "a", state: "staged" } } as Parameters<Actions["checkAndReboot"]>[0];
  return m.actions.checkAndReboot(o, "b", m.release).then(
    () => undefined,
    (e: unknown) => e,
  );
}

describe("check-and-reboot", () => {
  it("a slot that matches, with the turn held: records the trial, arms it, reboots", async () => {
    const m = await machine({ ok: true, value: true }, "staged");
    expect(await check(m)).toBeInstanceOf(Rebooted);
    expect(m.memory.now.trial).toMatchObject({ ...m.release, slot: "b" });
    expect(m.memory.now.failed).toEqual([]);
    expect((await m.bootloader.read()).armed).toBe("b");
  });

  it("a slot whose bytes read back wrong: remembered as failed, reboots without the trial", async () => {
    const m = await machine({ ok: true, value: true }, "tampered");
    expect(await check(m)).toBeInstanceOf(Rebooted);
    expect(m.memory.now.failed.map((f) => f.digest)).toEqual([m.release.digest]);
    expect(m.memory.now.lastTrial).toMatchObject({
      result: "Skipped",
      reason: "SlotCheckMismatch",
    });
    expect((await m.bootloader.read()).armed).toBeNull();
    expect((await m.store.marker("b")).state).toBe("withdrawn");
  });

  it("a slot that cannot be read back (not staged): no verdict, nothing remembered, no reboot", async () => {
    const m = await machine({ ok: true, value: true }, "empty");
    const e = await check(m);
    expect(e).toMatchObject({ code: "LIKEN_AGENT_SLOT_CHECK_FAILED", retryable: true });
    expect((e as Error).message).toMatch(/LIKEN_SLOT_NOT_STAGED/);
    expect(m.memory.now.failed).toEqual([]);
    expect(m.memory.now.lastTrial).toBeUndefined();
    expect((await m.bootloader.read()).armed).toBeNull();
  });

  it("a turn that cannot be read (403): no arming, no reboot, the cause in the error", async () => {
    const m = await machine({ ok: false, error: FORBIDDEN }, "staged");
    const e = await check(m);
    expect(e).toMatchObject({ code: "LIKEN_AGENT_SLOT_CHECK_FAILED" });
    expect((e as Error).message).toMatch(/LIKEN_API_FORBIDDEN/);
    expect(m.memory.now.trial).toBeUndefined();
    expect((await m.bootloader.read()).armed).toBeNull();
    expect((await m.store.marker("b")).state).toBe("staged");
  });

  it("a turn no longer recorded: stands down without a reboot", async () => {
    const m = await machine({ ok: true, value: false }, "staged");
    expect(await check(m)).toBeUndefined();
    expect(m.memory.now.trial).toBeUndefined();
    expect((await m.bootloader.read()).armed).toBeNull();
  });

  it("a read-back past timeouts.slotCheckMs: no verdict, retried, no second read beside it", async () => {
    // 64 MiB hashed and compared take far longer than 1 ms on any disk or page cache.
    const m = await machine({ ok: true, value: true }, "staged", {
      slotCheckMs: 1,
      kernelBytes: 64 << 20,
    });
    const e = await check(m);
    expect(e).toMatchObject({ code: "LIKEN_AGENT_SLOT_CHECK_FAILED" });
    expect((e as Error).message).toMatch(/LIKEN_AGENT_SLOT_CHECK_TIMEOUT/);
    expect((e as Error).message).toMatch(/timeouts.slotCheckMs \(1 ms\)/);
    expect(m.memory.now.failed).toEqual([]);
    expect(m.memory.now.trial).toBeUndefined();
    expect((await m.bootloader.read()).armed).toBeNull();
    const again = await check(m);
    expect((again as Error).message).toMatch(/previous read-back, past its deadline, still runs/);
  });
});

describe("reboot with a command", () => {
  it("a command that fails: LIKEN_AGENT_REBOOT_FAILED with its exit code", async () => {
    const m = await machine({ ok: true, value: true }, "empty", { reboot: ["false"] });
    await expect(m.actions.reboot("test")).rejects.toMatchObject({
      code: "LIKEN_AGENT_REBOOT_FAILED",
      message: expect.stringMatching(/false exited with 1/),
    });
  });

  it("still running rebootMs after the command: LIKEN_AGENT_REBOOT_FAILED, said with the timeout", async () => {
    const m = await machine({ ok: true, value: true }, "empty", { reboot: ["true"] });
    await expect(m.actions.reboot("test")).rejects.toMatchObject({
      code: "LIKEN_AGENT_REBOOT_FAILED",
      message: expect.stringMatching(/still runs 600000 ms later \(timeouts.rebootMs\)/),
    });
    expect(paused).toEqual([DEFAULT_TIMEOUTS.rebootMs]);
  });
});
