// One machine for the native tests that drive the agent daemon by hand: slot a holding the old
// release, slot b staged from a loopback channel (release-channel.ts), an agent.yaml, a
// kubeconfig naming a server that never answers, and `liken.slot=a` on its command line; the
// Actions that arm a trial as the daemon would (its reboot plays as a thrown Rebooted); and the
// API side of a daemon played: the watch cache shows one Machine and its Cluster, and each
// status write is handed to the test instead of being sent.
import { mkdirSync, readFileSync, truncateSync, writeFileSync } from "node:fs";
import path from "node:path";
import { KubeConfig } from "@kubernetes/client-node";
import { pino } from "pino";
import { stringify } from "yaml";
import { Actions, type ActionParts } from "../../src/agent/act.js";
import type { AgentConfig } from "../../src/agent/config.js";
import { AgentApi } from "../../src/agent/api.js";
import { AgentDaemon } from "../../src/agent/daemon.js";
import { DownloadSupervisor } from "../../src/agent/download.js";
import type { MemoryKeeper } from "../../src/agent/memory.js";
import type { Look } from "../../src/agent/look.js";
import type { NodeSeen } from "../../src/agent/rejoin.js";
import { DEFAULT_TIMEOUTS } from "../../src/agent/steps.js";
import { ApiView } from "../../src/agent/view.js";
import type { Cluster, Machine, MachineStatus } from "../../src/api/types.js";
import type { BootloaderConfig } from "../../src/bootloader/index.js";
import type { Bootloader } from "../../src/bootloader/types.js";
import { parseAgentConfig } from "../../src/slots/config.js";
import { downloadRelease } from "../../src/slots/stage.js";
import { SlotStore } from "../../src/slots/store.js";
import type { ReleaseChannel } from "./release-channel.js";

const KiB = 1024;

/** The exit that plays the reboot while the trial is armed. */
export class Rebooted extends Error {}

/**
 * File-backed slots in `dir`: slot a running (64 KiB), slot b (1 MiB) with `version` from the
 * channel downloaded, verified and staged, as `liken agent download` leaves it.
 */
export async function stagedSlots(
  dir: string,
  channel: Pick<ReleaseChannel, "server" | "digest">,
  version: string,
): Promise<{ file: string; slots: ReturnType<typeof parseAgentConfig> }> {
  mkdirSync(dir, { recursive: true });
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
  const { server, digest } = channel;
  await downloadRelease({ config: slots, source: server.url, version, digest });
  return { file, slots };
}

/**
 * A machine on disk with `version` staged in slot b; `config()` makes its AgentConfig. `name`:
 * its directory under the channel's root (a test with several machines names each).
 */
export async function stagedMachine(
  channel: ReleaseChannel,
  version: string,
  name = "m",
): Promise<{ dir: string; config: (c: Partial<AgentConfig>) => AgentConfig }> {
  const dir = path.join(channel.root, name);
  const { file, slots } = await stagedSlots(dir, channel, version);
  // Never contacted by a daemon whose run() (watches, heartbeat) is not started.
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
  const config = (c: Partial<AgentConfig>): AgentConfig => ({
    file,
    slots,
    machine: "m",
    cluster: "c",
    nodeName: "m",
    kubeconfig,
    bootloader: { backend: "grub", envDir: path.join(dir, "grub") } as BootloaderConfig,
    driverPods: {},
    cmdline,
    bootId: "/proc/sys/kernel/random/boot_id",
    reboot: { exitCode: 0 },
    heartbeatMs: 1000,
    loopMs: 1000,
    direct: false,
    timeouts: DEFAULT_TIMEOUTS,
    ...c,
  });
  return { dir, config };
}

/**
 * The Actions of a turn that arms the trial; their reboot throws Rebooted. `over` replaces
 * parts (a store that notes transitions, a report that records what is on disk).
 */
export function armingActions(
  cfg: AgentConfig,
  bootloader: Bootloader,
  memory: MemoryKeeper,
  over: Partial<ActionParts> = {},
): Actions {
  return new Actions({
    cfg,
    log: pino({ level: "silent" }),
    kc: () => Promise.resolve(new KubeConfig()),
    store: new SlotStore(cfg.slots),
    bootloader,
    memory,
    downloads: new DownloadSupervisor("unused", () => undefined),
    turnHeld: () =>
      Promise.resolve({
        ok: true,
        value: {
          machine: "m",
          grantedAt: "2026-12-07T00:00:00Z",
          grantedBy: "t",
          leader: false,
          version: "v",
        },
      }),
    reportRebooting: () => Promise.resolve(),
    signal: new AbortController().signal,
    pause: () => Promise.resolve(),
    exit: () => {
      throw new Rebooted();
    },
    ...over,
  });
}

/** A Cluster named "c" targeting `release` from `source`, with `status` as given. */
export function cluster(
  source: string,
  release: { version: string; digest: string },
  status: Cluster["status"] = {},
): Cluster {
  return {
    apiVersion: "liken.sh/v1alpha1",
    kind: "Cluster",
    metadata: { name: "c", resourceVersion: "1" },
    spec: { version: release.version, releases: { source, catalog: [release] } },
    status,
  } as Cluster;
}

/** The watch cache, played: `seen()`'s objects, reachable, never watched. */
class PlayedView extends ApiView {
  constructor(
    api: AgentApi,
    private readonly seen: () => { machine: Machine; cluster: Cluster },
    private readonly bootIdFile: string,
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
  /** The kubelet of the current boot posted its status: this boot's id, Ready just now. */
  override get node(): Look<NodeSeen | undefined> {
    const bootId = readFileSync(this.bootIdFile, "utf8").trim();
    return { ok: true, value: { bootId, ready: { status: "True", heartbeatAt: Date.now() } } };
  }
  override wrote(): void {}
}

/**
 * The daemon of `cfg` with its API side played (see the header), handed in through
 * DaemonOptions.apiSide: Machine "m" running `running`, Auto, and `c`; `onWrite` gets every
 * status the daemon writes. Drive it with tickOnce().
 */
export function playedDaemon(
  cfg: AgentConfig,
  c: Cluster,
  running: string,
  onWrite: (status: MachineStatus) => Promise<void>,
): AgentDaemon {
  let machine = {
    apiVersion: "liken.sh/v1alpha1",
    kind: "Machine",
    metadata: { name: "m", resourceVersion: "1" },
    spec: { cluster: "c", nodeName: "m", rebootPolicy: "Auto" },
    status: { version: running, step: "Updating" },
  } as Machine;
  const api = new AgentApi(cfg.kubeconfig, cfg.machine);
  const view = new PlayedView(api, () => ({ machine, cluster: c }), cfg.bootId);
  api.machines.updateStatus = async (_name, next, first) => {
    const written = await next(first!);
    if (written === undefined) return undefined;
    await onWrite(written.status!);
    machine = { ...written, metadata: { ...written.metadata, resourceVersion: "2" } };
    return machine;
  };
  return new AgentDaemon(cfg, pino({ level: "silent" }), {
    entry: "unused",
    apiSide: { api, view },
  });
}
