// The agent daemon: observe (observe.ts), decide (steps.ts), report (status.ts, written by
// status-write.ts), act (act.ts); again every loopMs, and at once when a watch of its Machine,
// Cluster or Node sees a change (view.ts). Beside the loop run its side parts (side-part.ts),
// started and stopped together: its identity, heartbeat, watchdog, downloads, post-promotion
// checks and peer server. This file only wires those parts and runs the loop.
//
// What it loads: the idle agent reaches the API server through the lean client (api.ts) and
// never loads @kubernetes/client-node; the drain loads it on a turn (docs/agent.md, "Memory").
//
// Must never: reboot unless decide() said so, which needs a turn record read from the API
// server (check-and-reboot re-reads it right before arming); arm a trial before the slot was
// read back and matched; change the default slot other than by bootloader.confirm() after the
// trial boot rejoined.
import { setTimeout as sleep } from "node:timers/promises";
import type { Logger } from "pino";
import { createBootloader } from "../bootloader/index.js";
import { errorCode, errorText } from "../errors.js";
import { sdNotify, trimMemory } from "../native/index.js";
import { SlotStore } from "../slots/store.js";
import { Actions } from "./act.js";
import { AgentApi, kubeConfigWhenNeeded } from "./api.js";
import { bootClockMs } from "./clock.js";
import type { AgentConfig } from "./config.js";
import { DownloadPart } from "./download-part.js";
import { healthGates } from "./health-run.js";
import { BlockingPods } from "./blocking-pods.js";
import { HeartbeatPart } from "./heartbeat-part.js";
import { IdentityPart } from "./identity-part.js";
import { PostPromotionGates } from "./post-promotion-run.js";
import { MemoryFile, MemoryKeeper } from "./memory.js";
import { NO_METER, type AgentMeter } from "./meter.js";
import { Observer, type Observation } from "./observe.js";
import type { StatusExtras } from "./status.js";
import { LastProblem } from "./last-problem.js";
import { statusReport, type Report } from "./status-write.js";
import { decide, rebootingDecision, type Action, type Decision } from "./steps.js";
import { WatchedDrain } from "./drain-watch.js";
import type { MachineStatus } from "../api/types.js";
import { PeerServingPart } from "./peer-serving-part.js";
import type { SidePart } from "./side-part.js";
import { agentView, type ApiView } from "./view.js";
import { WatchdogPart } from "./watchdog-part.js";
import { trimDue } from "./memory-trim.js";
import type { MachineIdentity } from "./identity/identity.js";

/** Actions whose outcome the next status must carry: done before that status is written. */
const RECORD_BEFORE_REPORT: ReadonlySet<Action["kind"]> = new Set([
  "fall-back-report",
  "not-taken-report",
  "not-armed-report",
  "install-boot-files",
]);

/** One handler per action kind: the switch over actions, as data. */
type Handlers = { [K in Action["kind"]]: (a: Extract<Action, { kind: K }>) => Promise<void> };

export interface DaemonOptions {
  /** The script that starts liken with process.execPath (for the download child). */
  entry: string;
  /** The metrics to tell (agent/metrics.ts when they are served; silent otherwise). */
  meter?: AgentMeter;
  /**
   * The API client and watch cache to use instead of ones built from cfg.kubeconfig: for a test
   * that plays the API side and drives tickOnce() (test/native/agent-daemon-order.test.ts).
   * `liken agent run` never sets it.
   */
  apiSide?: { api: AgentApi; view: ApiView };
  /**
   * The machine's own certificate, joined for before the daemon was built (identity/): the
   * daemon renews it while it runs and reports its expiry. Absent: the kubeconfig as given,
   * its certificate's expiry reported as Provided.
   */
  identity?: MachineIdentity;
}

export class AgentDaemon {
  private readonly api: AgentApi;
  private readonly view: ApiView;
  private readonly memory: MemoryKeeper;
  private readonly observer: Observer;
  private readonly actions: Actions;
  /** The drain action, watched while it runs (drain-watch.ts). */
  private readonly drains: WatchedDrain;
  /** Writes the status a decision makes; true when the stored status says it (status-write.ts). */
  private readonly report: Report;
  private readonly downloads: DownloadPart;
  private readonly heartbeat: HeartbeatPart;
  /** What runs beside the loop: started in this order, stopped in this order (side-part.ts). */
  private readonly sides: readonly SidePart[];
  private readonly abort = new AbortController();
  /** The last failure on the way to the target (last-problem.ts). */
  private readonly problems = new LastProblem();
  private phase = "";
  private wake: (() => void) | undefined;
  /** A watch saw a change since the current tick began: tick again at once. */
  private dirty = false;
  private lastTick = bootClockMs();
  /** Uptime (performance.now()) at the last malloc trim (memory-trim.ts). */
  private lastTrimMs: number | undefined;
  private acting = false;

  constructor(
    private readonly cfg: AgentConfig,
    private readonly log: Logger,
    opts: DaemonOptions,
  ) {
    this.api = opts.apiSide?.api ?? new AgentApi(cfg.kubeconfig, cfg.machine);
    const target = { machine: cfg.machine, cluster: cfg.cluster, nodeName: cfg.nodeName };
    this.view = opts.apiSide?.view ?? agentView(this.api, target, (why) => this.poke(why), log);
    const bootloader = createBootloader(cfg.bootloader);
    const store = new SlotStore(cfg.slots);
    const meter = opts.meter ?? NO_METER;
    const { api, view } = this;
    this.memory = new MemoryKeeper(new MemoryFile(cfg.slots.stateDir));
    this.downloads = new DownloadPart({
      ...{ entry: opts.entry, machine: cfg.machine, meter, log, api, view },
      actions: () => this.actions,
      problem: (p) => this.problems.download(p),
      wake: () => this.wake?.(),
      retryMs: cfg.timeouts.downloadRetryMs,
    });
    meter.trialFrom(() => this.memory.now.lastTrial);
    const downloads = this.downloads.supervisor;
    const parts = { cfg, log, bootloader, store, memory: this.memory, downloads };
    const health = healthGates(cfg, api.rest, log);
    const blocking = new BlockingPods({
      rest: api.rest,
      nodeName: cfg.nodeName,
      log,
      now: bootClockMs,
    });
    this.observer = new Observer({ ...parts, api, view, health, blocking });
    this.heartbeat = new HeartbeatPart(cfg, api, view, log);
    this.actions = new Actions({
      ...parts,
      health,
      meter,
      // client-node's config, loaded with the drain on the first turn (see the header).
      kc: kubeConfigWhenNeeded(cfg.kubeconfig),
      turnHeld: (r) => this.observer.turnHeld(r),
      reportRebooting: (reason) => this.reportRebooting(reason),
      signal: this.abort.signal,
      pause: (ms) => sleep(ms, undefined, { signal: this.abort.signal }).catch(() => undefined),
      exit: (code) => {
        void this.heartbeat.stop();
        process.exit(code);
      },
    });
    const observe = (): Promise<Observation> => this.observer.observe();
    const report = (now: Observation) => this.report(now, this.decideAndLog(now));
    this.drains = new WatchedDrain({ log, actions: this.actions, observe, report });
    const renewed = (): void => this.poke("client certificate renewed");
    this.sides = [
      new IdentityPart(opts.identity, api.rest, this.abort.signal, renewed),
      this.heartbeat,
      new WatchdogPart(() => this.acting || bootClockMs() - this.lastTick < 3 * cfg.loopMs + 5_000),
      this.downloads,
      new PostPromotionGates(healthGates(cfg, api.rest, log), log),
      // Last: it serves what the status without it says the slots hold.
      new PeerServingPart(cfg, store, meter, log),
    ];
    this.report = statusReport({
      ...{ api, view, memory: this.memory, log, machine: cfg.machine },
      extras: (seen, statusOf) => this.statusExtras(seen, statusOf),
    });
  }

  /** Runs until stop(); resolves after the current step finished or was safely abandoned. */
  async run(): Promise<void> {
    await this.memory.load();
    this.view.start();
    for (const side of this.sides) side.start();
    sdNotify("READY=1");
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
      for (const side of this.sides) await side.stop();
      this.view.stop();
      sdNotify("STOPPING=1");
    }
  }

  /** One pass of the loop as run() makes it, without its watches, heartbeat and watchdog. */
  async tickOnce(): Promise<void> {
    await this.memory.load();
    await this.tick();
  }

  /** SIGTERM: finish or safely abandon the current step, then return from run(). */
  stop(): void {
    this.abort.abort();
    this.wake?.();
  }

  /** A watch saw a change: tick now (or right after the tick under way). */
  private poke(why: string): void {
    this.log.debug({ why }, "woken");
    this.dirty = true;
    this.wake?.();
    this.drains.poke();
  }

  private pause(ms: number): Promise<void> {
    if (this.dirty || this.abort.signal.aborted) return Promise.resolve();
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
    this.dirty = false;
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
    const reported = await this.report(seen, dec);
    if (ANNOUNCED.has(dec.action.kind) && !reported) {
      // A disruption begins only after the status that announces it landed (seed 71742): the
      // operator judges "not started" from that status, and takes back a turn it believes
      // untouched. The next tick writes it again and decides afresh.
      this.log.warn(
        { action: dec.action.kind },
        "not acting: the status announcing it was not written",
      );
      return;
    }
    await this.act(seen, dec.action);
    await this.afterAction(seen, dec.action);
    const uptimeMs = performance.now();
    if (trimDue({ uptimeMs, lastTrimMs: this.lastTrimMs, idle: dec.action.kind === "wait" })) {
      this.lastTrimMs = uptimeMs;
      this.log.debug({ released: trimMemory() }, "malloc arenas trimmed");
    }
  }

  /** The side parts after the action (the gates after promotion); news is reported at once. */
  private async afterAction(seen: Observation, done: Action): Promise<void> {
    this.acting = true; // a slow gate is work under way: the watchdog stays fed
    let news = false;
    try {
      for (const side of this.sides) if (await side.afterAction?.(seen, done)) news = true;
    } finally {
      this.acting = false;
    }
    if (!news) return;
    const now = await this.observer.observe();
    await this.report(now, this.decideAndLog(now));
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
      this.problems.done(a.kind);
    } catch (e) {
      this.log.error({ err: errorText(e), code: errorCode(e), action: a.kind }, "action failed");
      this.problems.failed(a.kind, e);
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
      "install-boot-files": (a) => acts.installBootFiles(a.slot, a.release),
      withdraw: (a) => acts.withdraw(a.slot),
      "cancel-download": (a) => {
        if (a.failed) this.downloads.supervisor.failed();
        return acts.stopDownload(a.failed ? "no progress" : "the target changed");
      },
      download: (a) => this.downloads.begin(seen, a),
      drain: (a) => this.drains.run(seen, a.release),
      "check-and-reboot": (a) => acts.checkAndReboot(o, a.slot, a.release),
      reboot: (a) =>
        o.boot.kind === "on-trial" ? acts.giveUpTrial(a.reason, a.failure) : acts.reboot(a.reason),
      "check-health": () => acts.checkHealth(seen.cluster),
      disarm: () => acts.disarm(),
      promote: (a) => acts.promote(o, a.slot),
      "fall-back-report": (a) => acts.fallBack(o, a.slot),
      "not-taken-report": (a) => acts.notTaken(o, a.slot),
      "not-armed-report": (a) => acts.notArmed(o, a.slot),
      "release-turn": (a) => acts.releaseTurn(a.reason),
    };
  }

  /** What the status says beside the decision: the loop's own, then each side part's share. */
  private async statusExtras(
    seen: Observation,
    statusOf: (x: StatusExtras) => MachineStatus,
  ): Promise<StatusExtras> {
    const blocker = this.actions.drainBlocker;
    const problem = this.problems.problem;
    const x: StatusExtras = {
      now: new Date(),
      ...(blocker ? { drainBlocker: blocker } : {}),
      ...(problem ? { problem } : {}),
      ...(this.observer.registered ? { registration: this.observer.registered } : {}),
    };
    for (const side of this.sides) Object.assign(x, await side.status?.(seen, () => statusOf(x)));
    return x;
  }

  /** The status right before a reboot, so the watcher sees why the machine went down. */
  private async reportRebooting(reason: string): Promise<void> {
    await this.report(await this.observer.observe(), rebootingDecision(reason));
  }
}

/** Actions that begin a disruption: taken only once the status announcing them is stored. */
const ANNOUNCED: ReadonlySet<Action["kind"]> = new Set(["drain"]);
