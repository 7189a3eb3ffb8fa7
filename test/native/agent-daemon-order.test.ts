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
import { mkdirSync, truncateSync, writeFileSync } from "node:fs";
import path from "node:path";
import { KubeConfig } from "@kubernetes/client-node";
import { pino } from "pino";
import { stringify } from "yaml";
import { Actions } from "../../src/agent/act.js";
import type { AgentConfig } from "../../src/agent/config.js";
import { AgentApi } from "../../src/agent/api.js";
import { AgentDaemon } from "../../src/agent/daemon.js";
import { DownloadSupervisor } from "../../src/agent/download.js";
import { MemoryFile, MemoryKeeper, type Memory } from "../../src/agent/memory.js";
import type { Look } from "../../src/agent/observe.js";
import { DEFAULT_TIMEOUTS } from "../../src/agent/steps.js";
import { ApiView } from "../../src/agent/view.js";
import type { Cluster, Machine, MachineStatus } from "../../src/api/types.js";
import { ENV_FILES, DirEnvStore } from "../../src/bootloader/envstore.js";
import { grubBoot } from "../../src/bootloader/firmware.js";
import { GrubBootloader, initialEnvBlock } from "../../src/bootloader/grub.js";
import { parseAgentConfig } from "../../src/slots/config.js";
import { downloadRelease } from "../../src/slots/stage.js";
import { SlotStore } from "../../src/slots/store.js";
import { observed } from "../unit/agent-fixtures.js";
import type { FaultServer } from "./fault-server.js";
import { startReleaseChannel, type ReleaseChannel } from "./release-channel.js";

const KiB = 1024;
const OLD = "2026.10.10-001";
const NEW = "2026.10.12-001";
let channel: ReleaseChannel;
let root = "";
let server: FaultServer;
let digest = "";

beforeAll(async () => {
  channel = await startReleaseChannel("liken-daemon-order-", NEW);
  ({ root, server, digest } = channel);
});
afterAll(() => channel.close());

/** The exit that plays the reboot while the trial is armed. */
class Rebooted extends Error {}

/** The watch cache, played: these objects, reachable, never watched. */
class PlayedView extends ApiView {
  constructor(
    api: AgentApi,
    private readonly seen: () => { machine: Machine; cluster: Cluster },
  ) {
    super(
      api,
      { machine: "m", cluster: "c", nodeName: "m" },
      () => undefined,
      () => undefined,
    );
  }
  override get reachable(): boolean {
    return true;
  }
  override get failure(): undefined {
    return undefined;
  }
  override get machineMissing(): boolean {
    return false;
  }
  override get machine(): Machine {
    return this.seen().machine;
  }
  override get cluster(): Cluster {
    return this.seen().cluster;
  }
  override get node(): Look<boolean> {
    return { ok: true, value: true };
  }
  override wrote(): void {}
}

it("a trial that fell back is saved before the first status that reports it", async () => {
  const dir = path.join(root, "m");
  const esp = path.join(dir, "grub");
  mkdirSync(esp, { recursive: true });
  for (const f of ENV_FILES) writeFileSync(path.join(esp, f), initialEnvBlock("a"));
  writeFileSync(path.join(dir, "a.img"), Buffer.alloc(64 * KiB, 0x5a));
  writeFileSync(path.join(dir, "b.img"), Buffer.alloc(0));
  truncateSync(path.join(dir, "b.img"), 1024 * KiB);
  const file = path.join(dir, "agent.yaml");
  const yaml = stringify({
    slots: { a: { device: "a.img" }, b: { device: "b.img" } },
    running: "a",
    stateDir: "state",
  });
  writeFileSync(file, yaml);
  const slots = parseAgentConfig(yaml, file);
  mkdirSync(slots.stateDir, { recursive: true });
  await downloadRelease({ config: slots, source: server.url, version: NEW, digest });
  // Never contacted: the daemon's run() (watches, heartbeat) is not started.
  const kubeconfig = path.join(dir, "kubeconfig");
  writeFileSync(
    kubeconfig,
    stringify({
      apiVersion: "v1",
      kind: "Config",
      clusters: [{ name: "c", cluster: { server: "https://127.0.0.1:9" } }],
      users: [{ name: "u", user: { token: "t" } }],
      contexts: [{ name: "x", context: { cluster: "c", user: "u" } }],
      "current-context": "x",
    }),
  );
  const cmdline = path.join(dir, "cmdline");
  writeFileSync(cmdline, "liken.slot=a\n");
  const cfg: AgentConfig = {
    file,
    slots,
    machine: "m",
    cluster: "c",
    nodeName: "m",
    kubeconfig,
    bootloader: { backend: "grub", envDir: esp },
    driverPods: {},
    cmdline,
    reboot: { exitCode: 0 },
    heartbeatMs: 1000,
    loopMs: 1000,
    direct: false,
    timeouts: DEFAULT_TIMEOUTS,
  };

  // The turn: the slot reads back and matches, the trial is armed and remembered, "reboot".
  const memFile = new MemoryFile(slots.stateDir);
  const before = new MemoryKeeper(memFile);
  await before.load();
  const arming = new Actions({
    cfg,
    log: pino({ level: "silent" }),
    kc: () => Promise.resolve(new KubeConfig()),
    store: new SlotStore(slots),
    bootloader: new GrubBootloader(new DirEnvStore(esp)),
    memory: before,
    downloads: new DownloadSupervisor("unused", () => undefined),
    turnHeld: () => Promise.resolve({ ok: true, value: true }),
    reportRebooting: () => Promise.resolve(),
    signal: new AbortController().signal,
    pause: () => Promise.resolve(),
    exit: () => {
      throw new Rebooted();
    },
  });
  const release = { version: NEW, digest };
  await expect(arming.checkAndReboot(observed(), "b", release)).rejects.toBeInstanceOf(Rebooted);
  // GRUB boots the trial of b once, the kernel panics, GRUB boots the default a again.
  expect(await grubBoot(new DirEnvStore(esp))).toMatchObject({ slot: "b", trial: true });
  expect(await grubBoot(new DirEnvStore(esp))).toMatchObject({ slot: "a", trial: false });

  // The daemon, started after that boot; its API side played (see the header).
  const cluster: Cluster = {
    apiVersion: "liken.sh/v1alpha1",
    kind: "Cluster",
    metadata: { name: "c", resourceVersion: "1" },
    spec: { version: NEW, releases: { source: server.url } },
  } as Cluster;
  let machine: Machine = {
    apiVersion: "liken.sh/v1alpha1",
    kind: "Machine",
    metadata: { name: "m", resourceVersion: "1" },
    spec: { cluster: "c", nodeName: "m", rebootPolicy: "Auto" },
    status: { version: OLD, step: "Updating" },
  } as Machine;
  const api = new AgentApi(kubeconfig, "m");
  const view = new PlayedView(api, () => ({ machine, cluster }));
  const writes: { status: MachineStatus; onDisk: Memory }[] = [];
  api.machines.updateStatus = async (_name, next, first) => {
    const written = await next(first!);
    if (written === undefined) return undefined;
    writes.push({ status: written.status!, onDisk: await memFile.load() });
    machine = { ...written, metadata: { ...written.metadata, resourceVersion: "2" } };
    return machine;
  };

  const started = Date.now();
  const daemon = new AgentDaemon(cfg, pino({ level: "silent" }), {
    entry: "unused",
    apiSide: { api, view },
  });
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
