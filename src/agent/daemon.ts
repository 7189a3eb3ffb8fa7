// The agent daemon: observe (observe.ts), decide (steps.ts), report (status.ts), act (act.ts);
// again every loopMs. This file only wires those parts and runs the loop.
//
// Must never: reboot unless decide() said so, which needs a turn record read from the API
// server (check-and-reboot re-reads it right before arming); arm a trial before the slot was
// read back and matched; change the default slot other than by bootloader.confirm() after the
// trial boot rejoined.
import { setTimeout as sleep } from "node:timers/promises";
import { CoreV1Api, type KubeConfig } from "@kubernetes/client-node";
import type { Logger } from "pino";
import { LikenApi } from "../api/client.js";
import { HeartbeatClient } from "../api/heartbeat.js";
import { loadKubeConfig } from "../api/kubeconfig.js";
import { rfc3339 } from "../api/time.js";
import { createBootloader } from "../bootloader/index.js";
import { startHeartbeat, type HeartbeatLoop } from "../coordinator/heartbeat.js";
import { errorCode, errorText } from "../errors.js";
import { sdNotify } from "../native/index.js";
import { SlotStore } from "../slots/store.js";
import { Actions } from "./act.js";
import { bootClockMs } from "./clock.js";
import type { AgentConfig } from "./config.js";
import { DownloadSupervisor, type DownloadEnd } from "./download.js";
import { MemoryFile, MemoryKeeper } from "./memory.js";
import { Observer, type Observation } from "./observe.js";
import { machineStatus, sameStatus, type Problem, type StatusExtras } from "./status.js";
import { decide, rebootingDecision, type Action, type Decision } from "./steps.js";

/** Actions whose outcome the next status must carry: done before that status is written. */
const RECORD_BEFORE_REPORT: ReadonlySet<Action["kind"]> = new Set(["fall-back-report"]);

/** One handler per action kind: the switch over actions, as data. */
type Handlers = { [K in Action["kind"]]: (a: Extract<Action, { kind: K }>) => Promise<void> };

export interface DaemonOptions {
  /** The script that starts liken with process.execPath (for the download child). */
  entry: string;
}

export class AgentDaemon {
  private readonly kc: KubeConfig;
  private readonly api: LikenApi;
  private readonly memory: MemoryKeeper;
  private readonly downloads: DownloadSupervisor;
  private readonly observer: Observer;
  private readonly actions: Actions;
  private readonly abort = new AbortController();
  /** The last failure on the way to the target, and which action it came from. */
  private problem: (Problem & { action: Action["kind"] }) | undefined;
  private phase = "";
  private wake: (() => void) | undefined;
  private lastTick = bootClockMs();
  private acting = false;
  private heartbeat: HeartbeatLoop | undefined;

  constructor(
    private readonly cfg: AgentConfig,
    private readonly log: Logger,
    opts: DaemonOptions,
  ) {
    this.kc = loadKubeConfig(cfg.kubeconfig);
    this.api = new LikenApi(this.kc, `liken-agent-${cfg.machine}`);
    const bootloader = createBootloader(cfg.bootloader);
    const store = new SlotStore(cfg.slots);
    this.memory = new MemoryKeeper(new MemoryFile(cfg.slots.stateDir));
    this.downloads = new DownloadSupervisor(opts.entry, (end) => this.downloadEnded(end));
    const core = this.kc.makeApiClient(CoreV1Api);
    const parts = { cfg, log, bootloader, store, memory: this.memory, downloads: this.downloads };
    this.observer = new Observer({ ...parts, api: this.api, core });
    this.actions = new Actions({
      ...parts,
      kc: this.kc,
      turnHeld: (r) => this.observer.turnHeld(r),
      reportRebooting: (reason) => this.reportRebooting(reason),
      signal: this.abort.signal,
      pause: (ms) => sleep(ms, undefined, { signal: this.abort.signal }).catch(() => undefined),
      exit: (code) => {
        this.heartbeat?.stop();
        process.exit(code);
      },
    });
  }

  /** Runs until stop(); resolves after the current step finished or was safely abandoned. */
  async run(): Promise<void> {
    await this.memory.load();
    this.heartbeat = startHeartbeat(
      new HeartbeatClient(this.kc),
      this.cfg.machine,
      this.cfg.cluster,
      this.cfg.heartbeatMs,
      (e) => this.log.warn({ err: errorText(e), code: errorCode(e) }, "heartbeat not renewed"),
    );
    sdNotify("READY=1");
    // The watchdog is fed only while the loop comes round (or an action it awaits is
    // running), so a wedged event loop or a loop that stopped turning trips systemd's
    // WatchdogSec and the agent is restarted.
    const watchdog = setInterval(() => {
      if (this.acting || bootClockMs() - this.lastTick < 3 * this.cfg.loopMs + 5_000) {
        sdNotify("WATCHDOG=1");
      }
    }, 5_000);
    try {
      while (!this.abort.signal.aborted) {
        // A failed look (bootloader unreadable, state dir gone) is logged and looked at again;
        // nothing is acted on without a complete observation.
        await this.tick().catch((e: unknown) =>
          this.log.error({ err: errorText(e), code: errorCode(e) }, "tick failed"),
        );
        await this.pause(this.cfg.loopMs);
      }
    } finally {
      this.heartbeat.stop();
      clearInterval(watchdog);
      await this.actions.stopDownload("the agent stops");
      sdNotify("STOPPING=1");
    }
  }

  /** SIGTERM: finish or safely abandon the current step, then return from run(). */
  stop(): void {
    this.abort.abort();
    this.wake?.();
  }

  private pause(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const t = setTimeout(resolve, ms);
      this.wake = () => {
        clearTimeout(t);
        resolve();
      };
    });
  }

  private async tick(): Promise<void> {
    this.lastTick = bootClockMs();
    let seen = await this.observer.observe();
    let dec = this.decideAndLog(seen);
    if (RECORD_BEFORE_REPORT.has(dec.action.kind)) {
      // A trial's verdict is recorded on the machine first and reported with its record:
      // a status that said Failed (or Ready) before lastTrial said why would be read, by a
      // person or a watcher, as a verdict without its reason.
      await this.act(seen, dec.action);
      seen = await this.observer.observe();
      dec = this.decideAndLog(seen);
    }
    await this.report(seen, dec);
    await this.act(seen, dec.action);
  }

  private decideAndLog(seen: Observation): Decision {
    const dec = decide(seen.o, this.cfg.timeouts);
    if (dec.phase !== this.phase) {
      const { phase, step, why } = dec;
      this.log.info({ phase, step, why, action: dec.action.kind }, "phase");
      this.phase = dec.phase;
    }
    return dec;
  }

  /** Performs one action; a failure is logged and reported with its code, never thrown. */
  private async act(seen: Observation, a: Action): Promise<void> {
    this.acting = true;
    try {
      await this.perform(seen, a);
      if (this.problem?.action === a.kind && a.kind !== "download") this.problem = undefined;
    } catch (e) {
      const code = errorCode(e);
      this.log.error({ err: errorText(e), code, action: a.kind }, "action failed");
      const message = `${a.kind}: ${errorText(e)}${code ? ` [${code}]` : ""}`;
      this.problem = { action: a.kind, reason: reasonOf(code), message };
    } finally {
      this.acting = false;
    }
  }

  private perform(seen: Observation, a: Action): Promise<void> {
    const run = this.handlers(seen)[a.kind] as (a: Action) => Promise<void>;
    return run(a);
  }

  /** What each action does, given this tick's observation. */
  private handlers(seen: Observation): Handlers {
    const o = seen.o;
    const acts = this.actions;
    const none = (): Promise<void> => Promise.resolve();
    return {
      wait: none,
      "request-turn": none, // the turnRequest in the status just written is the ask
      withdraw: (a) => acts.withdraw(a.slot),
      "cancel-download": (a) => {
        if (a.failed) this.downloads.failed();
        return acts.stopDownload(a.failed ? "no progress" : "the target changed");
      },
      download: (a) => {
        const source = seen.cluster?.spec.releases.source;
        if (source === undefined) return none();
        return acts.startDownload(source, a.slot, a.release, o.running.slot);
      },
      drain: (a) => acts.drain(a.release, seen.cluster),
      "check-and-reboot": (a) => acts.checkAndReboot(o, a.slot, a.release),
      reboot: (a) => acts.reboot(a.reason),
      disarm: () => acts.disarm(),
      promote: (a) => acts.promote(o, a.slot),
      "fall-back-report": (a) => acts.fallBack(o, a.slot),
      "release-turn": (a) => acts.releaseTurn(a.reason),
    };
  }

  private downloadEnded(end: DownloadEnd): void {
    const { release, slot } = end;
    if (end.kind === "staged") {
      this.problem = undefined;
      this.log.info({ version: release.version, slot }, "download staged and verified");
    } else if (end.kind === "failed") {
      const message = `${release.version} into slot ${slot}: ${end.said}`;
      this.problem = { action: "download", reason: "DownloadFailed", message };
      this.log.warn(
        { version: release.version, code: end.exitCode, stderr: end.said },
        "download failed",
      );
    }
    this.wake?.();
  }

  private async report(seen: Observation, dec: Decision): Promise<void> {
    const { o, machine, progress } = seen;
    if (!o.apiReachable || machine === undefined) return;
    const blocker = this.actions.drainBlocker;
    const problem = this.problem;
    const extras: StatusExtras = {
      now: new Date(),
      ...(progress ? { progress } : {}),
      ...(blocker ? { drainBlocker: blocker } : {}),
      ...(problem ? { problem: { reason: problem.reason, message: problem.message } } : {}),
    };
    const mem = this.memory.now;
    if (sameStatus(machine.status, machineStatus(machine.status, o, dec, mem, extras))) return;
    try {
      // Conditioned on the resourceVersion just read; a conflict is retried with a fresh read.
      await this.api.machines.updateStatus(this.cfg.machine, (cur) => ({
        ...cur,
        status: {
          ...machineStatus(cur.status, o, dec, mem, extras),
          lastHeartbeatTime: rfc3339(new Date()),
        },
      }));
    } catch (e) {
      this.log.warn({ err: errorText(e), code: errorCode(e) }, "status not written");
    }
  }

  /** The status right before a reboot, so the watcher sees why the machine went down. */
  private async reportRebooting(reason: string): Promise<void> {
    await this.report(await this.observer.observe(), rebootingDecision(reason));
  }
}

/** The condition reason for a failed action, from its code where liken knows it. */
const REASONS: Readonly<Record<string, string>> = {
  LIKEN_AGENT_RELEASE_REFUSED: "ReleaseRefused",
  LIKEN_AGENT_REBOOT_FAILED: "RebootFailed",
  LIKEN_AGENT_SLOT_CHECK_FAILED: "SlotCheckFailed",
};

function reasonOf(code: string | undefined): string {
  if (code === undefined) return "ActionFailed";
  return REASONS[code] ?? (code.startsWith("LIKEN_DRAIN_") ? "DrainFailed" : "ActionFailed");
}
