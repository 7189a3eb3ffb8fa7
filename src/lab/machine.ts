// A simulated machine: two file-backed slots, an ESP directory with liken's two GRUB
// environment copies, and the real `liken agent run` as a child process. The supervisor plays
// what cannot run here, following the documented behaviour of the real parts:
//   - systemd: Restart=always (an agent that exits for any other reason is started again in
//     the same boot), SIGTERM on stop;
//   - the reboot: the agent's config says `reboot: {exitCode: 194}`; exit code 194 means
//     "every state is synced, reboot now". The supervisor then powers the machine through
//     the firmware model (src/bootloader/firmware.ts), which reads and writes the same
//     grubenv bytes the agent's GRUB backend wrote, and boots the slot GRUB would boot;
//   - the kernel command line: `liken.slot=<x>` written to the file the config names, and a
//     fresh boot id (the kernel's random boot_id) to the file the config's bootId names;
//   - the kubelet: at every boot that comes up, the Node's status.nodeInfo.bootID set to that
//     boot id with a fresh Ready heartbeat (kubelet.ts), as a kubelet starting in it does;
//   - faults of a trial boot: "panic" (panic=N reboots at once), "hang" (the watchdog armed
//     for the trial resets it after hangResetMs), "no-network" (the OS starts, the agent runs,
//     but neither it nor the kubelet reaches the API server: the trial is never observed, and
//     its prove timeout reboots without a verdict), "kubelet-down" (the OS and the agent run,
//     the kubelet never starts: the Node keeps the last boot's id, so the trial does not
//     rejoin and its prove timeout reboots with NodeNotRejoined).
//     Faults apply to trial boots only, as firmware.ts does.
import { spawn, type ChildProcess } from "node:child_process";
import { randomUUID } from "node:crypto";
import { appendFile, mkdir, open, writeFile } from "node:fs/promises";
import path from "node:path";
import { stringify } from "yaml";
import { DirEnvStore, ENV_FILES } from "../bootloader/envstore.js";
import { bootMachine, type FirmwareQuirks, type TrialFault } from "../bootloader/firmware.js";
import { initialEnvBlock } from "../bootloader/grub.js";
import type { Slot } from "../bootloader/types.js";
import { downloadArgv } from "../agent/download.js";
import type { AgentYaml } from "../agent/config-schema.js";
import type { HealthCommand } from "../agent/health.js";
import type { Timeouts } from "../agent/steps.js";
import { likenEntry } from "../cli/entry.js";
import { AGENT_NODE_OPTIONS } from "../agent/node-options.js";
import { errorText } from "../errors.js";
import { postBootStatus } from "./kubelet.js";

/** The exit code by which the agent asks its supervisor for a reboot (docs/agent.md). */
export const REBOOT_EXIT_CODE = 194;

export type LabFault = TrialFault | "no-network" | "kubelet-down";

export interface SimulatedMachineOptions {
  name: string;
  /** A fresh directory for this machine's slots, ESP, state and logs. */
  dir: string;
  cluster: string;
  /**
   * The kubeconfig the agent uses; with `bootstrapKubeconfig`, none: the agent joins with
   * that and writes its own (state/identity/kubeconfig).
   */
  kubeconfig?: string;
  /**
   * The fleet's shared bootstrap credential: the machine starts with it alone and gets its
   * own certificate (docs/machine.md, "Identity").
   */
  bootstrapKubeconfig?: string;
  nodeName?: string;
  /** Bytes per slot file (sparse). */
  slotSize?: number;
  loopSeconds?: number;
  heartbeatSeconds?: number;
  timeouts?: Partial<Timeouts>;
  /** How long a hung trial boot sits until the watchdog resets it. */
  hangResetMs?: number;
  /**
   * How the release in a slot behaves on its trial boot when `faults` says nothing for that
   * slot (the lab reads it from the kernel artifact's bytes). Default: it comes up.
   */
  trialFault?: (slot: Slot, device: string) => Promise<LabFault>;
  /** Extra environment for the agent (LIKEN_LOG_LEVEL...). */
  env?: NodeJS.ProcessEnv;
  /** Host checks of a trial boot (agent.yaml health.commands). */
  healthCommands?: HealthCommand[];
  /**
   * The identity the stand-in kubelet posts the Node's status with (kubelet.ts); default: the
   * agent's kubeconfig (the lab's agents may not write Node status: it passes its admin's).
   */
  kubeletKubeconfig?: string;
  /** More agent.yaml fields, written over the simulated machine's own (role, rebootPolicy...). */
  agentYaml?: Partial<AgentYaml>;
}

export interface BootRecordEntry {
  n: number;
  slot: Slot;
  trial: boolean;
  outcome: "up" | "panicked" | "hung";
  fault: LabFault;
  at: number;
}

export class SimulatedMachine {
  readonly boots: BootRecordEntry[] = [];
  /** Exit codes of every agent process, in order. */
  readonly exits: (number | null)[] = [];
  /** Faults per slot, for the slot's next trial boots (set by tests: "this slot's kernel panics"). */
  faults: Partial<Record<Slot, LabFault>> = {};
  /** How its bootloader differs from liken's (firmware.ts): e.g. it ignores the boot-once entry. */
  quirks: FirmwareQuirks = {};
  private child: ChildProcess | undefined;
  private childExit: Promise<number | null> | undefined;
  private running = false;
  private booting: Promise<void> = Promise.resolve();
  /** Ends the stand-in kubelet of the current boot (a reboot or a stop ends the boot). */
  private kubelet: AbortController | undefined;
  /** The boot ids the stand-in kubelet posted to the Node, in order (tests read them). */
  readonly postedBootIds: string[] = [];
  private readonly store: DirEnvStore;

  constructor(readonly opts: SimulatedMachineOptions) {
    this.store = new DirEnvStore(this.espDir);
  }

  get espDir(): string {
    return path.join(this.opts.dir, "esp");
  }
  get configFile(): string {
    return path.join(this.opts.dir, "agent.yaml");
  }
  get cmdlineFile(): string {
    return path.join(this.opts.dir, "cmdline");
  }
  get bootIdFile(): string {
    return path.join(this.opts.dir, "boot_id");
  }
  get logFile(): string {
    return path.join(this.opts.dir, "agent.log");
  }
  slotFile(s: Slot): string {
    return path.join(this.opts.dir, `slot-${s}.img`);
  }

  /** Lays out a blank machine whose firmware boots slot a. */
  async create(): Promise<void> {
    const o = this.opts;
    await mkdir(this.espDir, { recursive: true });
    await mkdir(path.join(o.dir, "state"), { recursive: true });
    for (const s of ["a", "b"] as const) {
      const fh = await open(this.slotFile(s), "w");
      await fh.truncate(o.slotSize ?? 8 * 1024 * 1024);
      await fh.close();
    }
    for (const f of ENV_FILES) await writeFile(path.join(this.espDir, f), initialEnvBlock("a"));
    await writeFile(this.cmdlineFile, "liken.slot=a\n");
    await writeFile(this.bootIdFile, `${randomUUID()}\n`);
    await this.writeConfig(this.configFile);
  }

  /** Where the agent's own kubeconfig is when it joins with the bootstrap credential. */
  get identityKubeconfig(): string {
    return path.join(this.opts.dir, "state", "identity", "kubeconfig");
  }

  /** agent.yaml; `unreachable`: a kubeconfig naming no server (the no-network fault). */
  private async writeConfig(file: string, unreachable?: string): Promise<void> {
    const o = this.opts;
    const boot = unreachable === undefined ? o.bootstrapKubeconfig : undefined;
    const kubeconfig = unreachable ?? (boot === undefined ? o.kubeconfig : this.identityKubeconfig);
    if (kubeconfig === undefined) {
      throw new Error(`machine ${o.name}: give kubeconfig or bootstrapKubeconfig`);
    }
    const cfg: AgentYaml = {
      machine: o.name,
      cluster: o.cluster,
      nodeName: o.nodeName ?? o.name,
      kubeconfig,
      ...(boot === undefined
        ? {}
        : { identity: { bootstrapKubeconfig: boot, approvalWarnSeconds: 30 } }),
      slots: { a: { device: this.slotFile("a") }, b: { device: this.slotFile("b") } },
      stateDir: path.join(o.dir, "state"),
      bootloader: { backend: "grub", envDir: this.espDir },
      cmdline: this.cmdlineFile,
      bootId: this.bootIdFile,
      reboot: { exitCode: REBOOT_EXIT_CODE },
      loopSeconds: o.loopSeconds ?? 1,
      heartbeatSeconds: o.heartbeatSeconds ?? 5,
      ...(o.timeouts ? { timeouts: o.timeouts } : {}),
      ...(o.healthCommands ? { health: { commands: o.healthCommands } } : {}),
      // Every simulated machine shares one host: each agent's metrics on a free loopback port
      // (its agent.log says which; docs/metrics.md).
      metricsAddress: "127.0.0.1:0",
      // Likewise the peer server (served only while the Cluster's spec.peers.enabled): its
      // Machine status.peers.url says which port it took.
      peersAddress: "127.0.0.1:0",
      ...o.agentYaml,
    };
    await writeFile(file, stringify(cfg));
  }

  /**
   * Installs a release into slot a as the factory image would: the real slot code downloads
   * and verifies it (as if slot b ran), and slot a boots it.
   */
  async install(source: string, version: string, digest: string): Promise<void> {
    const args = [
      likenEntry(),
      ...downloadArgv({
        config: this.configFile,
        source,
        release: { version, digest },
        running: "b",
      }),
    ];
    // Its progress lines are the factory's business; they are shown only if it fails.
    let said = "";
    const code = await new Promise<number | null>((resolve) => {
      const c = spawn(process.execPath, args, { stdio: ["ignore", "ignore", "pipe"] });
      c.stderr.on("data", (b: Buffer) => (said = (said + b.toString()).slice(-4000)));
      c.on("exit", resolve);
    });
    if (code !== 0) {
      throw new Error(`${this.opts.name}: installing ${version} failed (exit ${code}):\n${said}`);
    }
  }

  /** Powers the machine on: firmware, then the agent, and again after every reboot. */
  powerOn(): void {
    this.running = true;
    this.booting = this.boot();
  }

  private async boot(): Promise<void> {
    while (this.running) {
      const b = await bootMachine(this.store, {}, this.quirks);
      const fault = b.trial ? await this.faultOf(b.slot) : "none";
      const outcome = fault === "panic" ? "panicked" : fault === "hang" ? "hung" : "up";
      this.boots.push({
        n: this.boots.length + 1,
        slot: b.slot,
        trial: b.trial,
        outcome,
        fault,
        at: Date.now(),
      });
      if (outcome === "panicked") continue; // panic=N: the kernel reboots by itself
      if (outcome === "hung") {
        await new Promise((r) => setTimeout(r, this.opts.hangResetMs ?? 500));
        continue; // the watchdog reset
      }
      await writeFile(this.cmdlineFile, `liken.slot=${b.slot}\n`);
      const bootId = randomUUID();
      await writeFile(this.bootIdFile, `${bootId}\n`);
      // Without a network the kubelet cannot post either; with kubelet-down it never starts.
      if (fault === "none") this.startKubelet(bootId);
      let config = this.configFile;
      if (fault === "no-network") {
        config = path.join(this.opts.dir, "agent-no-network.yaml");
        await writeFile(path.join(this.opts.dir, "unreachable.kubeconfig"), UNREACHABLE_KUBECONFIG);
        await this.writeConfig(config, path.join(this.opts.dir, "unreachable.kubeconfig"));
      }
      // systemd's Restart=always within this boot, until the agent asks for a reboot.
      for (;;) {
        const code = await this.runAgent(config);
        this.exits.push(code);
        if (!this.running || code === REBOOT_EXIT_CODE) break;
        await new Promise((r) => setTimeout(r, 200)); // RestartSec
      }
      this.kubelet?.abort(); // the boot is over
    }
  }

  /** The kubelet of this boot posts the Node's status with its boot id (kubelet.ts). */
  private startKubelet(bootId: string): void {
    this.kubelet?.abort();
    const ac = new AbortController();
    this.kubelet = ac;
    const o = this.opts;
    const kubeconfig = o.kubeletKubeconfig ?? o.kubeconfig ?? this.identityKubeconfig;
    // What the API server refused, where a person looks for this machine's logs (it retries).
    let said = "";
    const onError = (e: unknown): void => {
      const what = errorText(e);
      if (what === said) return;
      said = what;
      const line = `${new Date().toISOString()} cannot post the Node's status: ${what}\n`;
      void appendFile(path.join(o.dir, "kubelet.log"), line).catch(() => undefined);
    };
    const node = o.nodeName ?? o.name;
    void postBootStatus(kubeconfig, node, bootId, ac.signal, onError).then((ok) => {
      if (ok) this.postedBootIds.push(bootId);
    });
  }

  private async faultOf(slot: Slot): Promise<LabFault> {
    const set = this.faults[slot];
    if (set !== undefined) return set;
    return (await this.opts.trialFault?.(slot, this.slotFile(slot))) ?? "none";
  }

  private async runAgent(config: string): Promise<number | null> {
    const log = await open(this.logFile, "a");
    const child = spawn(
      process.execPath,
      // The flags its systemd unit gives it (LIKEN_NODE_FLAGS), so the lab measures the same agent.
      [...AGENT_NODE_OPTIONS, likenEntry(), "agent", "run", "--config", config],
      {
        stdio: ["ignore", log.fd, log.fd],
        env: { ...process.env, ...this.opts.env },
        // Its own process group: a power cut kills the agent and its download child together.
        detached: true,
      },
    );
    this.child = child;
    this.childExit = new Promise((resolve) => child.on("exit", (code) => resolve(code)));
    const code = await this.childExit;
    await log.close();
    this.child = undefined;
    return code;
  }

  /** The running agent's process id (undefined between runs), for benches reading /proc. */
  get agentPid(): number | undefined {
    return this.child?.pid;
  }

  /** Kills the agent without warning (a crash); systemd starts it again in the same boot. */
  crashAgent(): void {
    this.child?.kill("SIGKILL");
  }

  /** Every process of this machine's OS (the agent's group), as a power cut does. */
  private killAll(): void {
    const pid = this.child?.pid;
    if (pid === undefined) return;
    try {
      process.kill(-pid, "SIGKILL");
    } catch {
      // already gone
    }
  }

  /** Stops the machine: SIGTERM to the agent (it finishes or abandons its step), no restart. */
  async stop(): Promise<void> {
    this.running = false;
    this.kubelet?.abort();
    this.child?.kill("SIGTERM");
    await this.childExit;
    await this.booting;
  }

  /** A power cut and power on: the agent dies at once, the firmware boots again. */
  async powerCycle(): Promise<void> {
    this.running = false;
    this.kubelet?.abort();
    this.killAll();
    await this.booting;
    this.powerOn();
  }
}

/** What the agent of a release whose network never comes up reads: nothing answers there. */
const UNREACHABLE_KUBECONFIG = `apiVersion: v1
kind: Config
clusters:
- name: none
  cluster: {server: "https://127.0.0.1:9", insecure-skip-tls-verify: true}
users:
- name: none
  user: {token: none}
contexts:
- name: none
  context: {cluster: none, user: none}
current-context: none
`;
