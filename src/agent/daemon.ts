// The agent daemon: observe, decide (steps.ts), act, report; again every loopMs. Only this file
// touches the world; each action is one named phase that logs its begin and end.
//
// Must never: reboot unless decide() said so, which needs a turn record read from the API
// server (check-and-reboot re-reads it right before arming); arm a trial before
// verifyStagedSlot() read the slot back and it matched; change the default slot other than by
// bootloader.confirm() after the trial boot rejoined.
import { spawn, type ChildProcess } from "node:child_process";
import { CoreV1Api, type KubeConfig } from "@kubernetes/client-node";
import type { Logger } from "pino";
import { HeartbeatClient } from "../api/heartbeat.js";
import { LikenApi } from "../api/client.js";
import { loadKubeConfig } from "../api/kubeconfig.js";
import type { Approval, Cluster, DrainBlocker, Machine, ReleaseRef } from "../api/types.js";
import { DirEnvStore } from "../bootloader/envstore.js";
import { GrubBootloader } from "../bootloader/grub.js";
import { judgeBoot, otherSlot, runningSlotFromCmdline, type Slot } from "../bootloader/types.js";
import { findTurn } from "../coordinator/turn.js";
import { startHeartbeat, type HeartbeatLoop } from "../coordinator/heartbeat.js";
import { drainNode, uncordonNode } from "../drain/index.js";
import { sdNotify } from "../native/index.js";
import { verifyStagedSlot } from "../slots/check.js";
import { SlotStore } from "../slots/store.js";
import { fetchDocument } from "../verify/fetch.js";
import { MAX_RELEASE_BYTES, releaseBase, verifyRelease } from "../verify/release.js";
import { readFile } from "node:fs/promises";
import { bootClockMs } from "./clock.js";
import type { AgentConfig } from "./config.js";
import { AgentError } from "./errors.js";
import { MemoryFile, rememberFailed, type Memory } from "./memory.js";
import { machineStatus, sameStatus, turnRelease, type StatusExtras } from "./status.js";
import { decide, type Action, type Decision, type Observed, type SlotView } from "./steps.js";
import { likenEntry } from "../cli/entry.js";
import { agentMetrics } from "./metrics.js";

/** Annotation on a Machine: a new value asks the agent to forget its failed releases. */
export const ANNOTATION_RETRY = "liken.sh/retry";

/** Actions whose outcome the next status must carry: done before that status is written. */
const RECORD_BEFORE_REPORT: ReadonlySet<Action["kind"]> = new Set(["fall-back-report"]);

interface Download {
  release: ReleaseRef;
  slot: Slot;
  child: ChildProcess;
  total: number;
  exited: Promise<number | null>;
  /** Bytes durable at the last look, and since when that number has not changed. */
  done: number;
  idleSince: number;
}

function now(): string {
  return new Date().toISOString().replace(/\.\d+Z$/, "Z");
}

function message(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

/** spec.approval approves exactly the staged release (and its digest, when it names one). */
export function approves(approval: Approval | undefined, staged: ReleaseRef | undefined): boolean {
  return (
    staged !== undefined &&
    approval?.version === staged.version &&
    (approval.digest === undefined || approval.digest === staged.digest)
  );
}

export class AgentDaemon {
  private readonly api: LikenApi;
  private readonly core: CoreV1Api;
  private readonly kc: KubeConfig;
  private readonly bootloader: GrubBootloader;
  private readonly store: SlotStore;
  private readonly memFile: MemoryFile;
  private mem: Memory = { failed: [] };
  private cluster: Cluster | undefined;
  private machine: Machine | undefined;
  private download: Download | undefined;
  private downloadFailedAt: number | undefined;
  private problem: StatusExtras["problem"];
  private drainBlocker: DrainBlocker | undefined;
  private heartbeat: HeartbeatLoop | undefined;
  private watchdog: NodeJS.Timeout | undefined;
  private phase = "";
  private stopping = false;
  private readonly abort = new AbortController();
  private wake: (() => void) | undefined;
  private lastTick = bootClockMs();
  private lastProgress: StatusExtras["progress"];
  private acting = false;

  constructor(
    private readonly cfg: AgentConfig,
    private readonly log: Logger,
  ) {
    this.kc = loadKubeConfig(cfg.kubeconfig);
    this.api = new LikenApi(this.kc, `liken-agent-${cfg.machine}`);
    this.core = this.kc.makeApiClient(CoreV1Api);
    this.bootloader = new GrubBootloader(new DirEnvStore(cfg.grubenvDir));
    this.store = new SlotStore(cfg.slots);
    this.memFile = new MemoryFile(cfg.slots.stateDir);
    agentMetrics.trialFrom(() => this.mem.lastTrial);
  }

  /** Runs until stop(); resolves after the current step finished or was safely abandoned. */
  async run(): Promise<void> {
    this.mem = await this.memFile.load();
    this.heartbeat = startHeartbeat(
      new HeartbeatClient(this.kc),
      this.cfg.machine,
      this.cfg.cluster,
      this.cfg.heartbeatMs,
      (e) => this.log.warn({ err: message(e) }, "heartbeat not renewed"),
    );
    sdNotify("READY=1");
    // The watchdog is fed only while the loop comes round (or an action it awaits is
    // running), so a wedged event loop or a loop that stopped turning trips systemd's
    // WatchdogSec and the agent is restarted.
    this.watchdog = setInterval(() => {
      if (this.acting || bootClockMs() - this.lastTick < 3 * this.cfg.loopMs + 5_000) {
        sdNotify("WATCHDOG=1");
      }
    }, 5_000);
    try {
      while (!this.stopping) {
        // A failed look (bootloader unreadable, state dir gone) is logged and looked at again;
        // nothing is acted on without a complete observation.
        await this.tick().catch((e: unknown) =>
          this.log.error({ err: message(e), code: (e as { code?: string }).code }, "tick failed"),
        );
        await this.pause(this.cfg.loopMs);
      }
    } finally {
      this.heartbeat.stop();
      clearInterval(this.watchdog);
      await this.stopDownload("the agent stops");
      sdNotify("STOPPING=1");
    }
  }

  /** SIGTERM: finish or safely abandon the current step, then return from run(). */
  stop(): void {
    this.stopping = true;
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
    let o = await this.observe();
    let dec = this.decideAndLog(o);
    if (RECORD_BEFORE_REPORT.has(dec.action.kind)) {
      // A trial's verdict is recorded on the machine first and reported with its record:
      // a status that said Failed (or Ready) before lastTrial said why would be read, by a
      // person or a watcher, as a verdict without its reason.
      await this.actSafely(o, dec.action);
      o = await this.observe();
      dec = this.decideAndLog(o);
    }
    await this.report(o, dec);
    await this.actSafely(o, dec.action);
  }

  private decideAndLog(o: Observed): Decision {
    const dec = decide(o, this.cfg.timeouts);
    if (dec.phase !== this.phase) {
      this.log.info(
        { phase: dec.phase, step: dec.step, why: dec.why, action: dec.action.kind },
        "phase",
      );
      this.phase = dec.phase;
    }
    return dec;
  }

  private async actSafely(o: Observed, action: Action): Promise<void> {
    this.acting = true;
    try {
      await this.act(o, action);
    } catch (e) {
      this.log.error(
        { err: message(e), code: (e as { code?: string }).code, action: action.kind },
        "action failed",
      );
      this.problem = { reason: "ActionFailed", message: `${action.kind}: ${message(e)}` };
    } finally {
      this.acting = false;
    }
  }

  // ------------------------------------------------------------------ observe

  private async slotView(slot: Slot): Promise<SlotView> {
    const m = await this.store.marker(slot);
    return {
      slot,
      state: m.state,
      ...(m.version && m.releaseDigest
        ? { release: { version: m.version, digest: m.releaseDigest } }
        : {}),
    };
  }

  private async readApi(): Promise<boolean> {
    try {
      this.cluster = await this.api.clusters.find(this.cfg.cluster);
      this.machine = await this.api.machines.find(this.cfg.machine);
      if (this.machine === undefined) this.machine = await this.register();
      return true;
    } catch (e) {
      this.log.warn({ err: message(e) }, "API server not reachable");
      return false;
    }
  }

  private register(): Promise<Machine> {
    this.log.info({ machine: this.cfg.machine }, "registering the Machine");
    return this.api.machines.create({
      apiVersion: "liken.sh/v1alpha1",
      kind: "Machine",
      metadata: { name: this.cfg.machine },
      spec: { cluster: this.cfg.cluster, nodeName: this.cfg.nodeName },
    });
  }

  private async nodeReady(): Promise<boolean> {
    try {
      const n = await this.core.readNode({ name: this.cfg.nodeName });
      return (n.status?.conditions ?? []).some((c) => c.type === "Ready" && c.status === "True");
    } catch {
      return false;
    }
  }

  private target(): ReleaseRef | undefined {
    const spec = this.cluster?.spec;
    const v = spec?.version;
    const entry = spec?.releases.catalog?.find((c) => c.version === v);
    return entry === undefined ? undefined : { version: entry.version, digest: entry.digest };
  }

  private async handleRetry(): Promise<void> {
    const v = this.machine?.metadata.annotations?.[ANNOTATION_RETRY];
    if (v === undefined || v === this.mem.retryHandled) return;
    this.log.info({ retry: v, forgotten: this.mem.failed.map((f) => f.version) }, "retry asked");
    this.mem = { ...this.mem, failed: [], retryHandled: v };
    await this.memFile.save(this.mem);
  }

  private async observe(): Promise<Observed> {
    const cmdline = await readFile(this.cfg.cmdline, "utf8");
    const runningSlot = runningSlotFromCmdline(cmdline);
    const boot = judgeBoot(await this.bootloader.read(), runningSlot);
    if (boot.kind === "on-trial" && this.mem.trialSeenAt === undefined) {
      this.mem = { ...this.mem, trialSeenAt: bootClockMs() };
      await this.memFile.save(this.mem);
    }
    this.lastProgress = await this.progress();
    const apiReachable = await this.readApi();
    if (apiReachable) await this.handleRetry();
    const running = await this.slotView(runningSlot);
    const other = await this.slotView(otherSlot(runningSlot));
    const spec = this.machine?.spec;
    const o: Observed = {
      now: bootClockMs(),
      apiReachable,
      boot,
      running,
      other,
      target: this.target(),
      policy: spec?.rebootPolicy ?? "Manual",
      approved: false,
      turn: false,
      download: this.download?.release,
      downloadIdleSince: this.download?.idleSince,
      downloadFailedAt: this.downloadFailedAt,
      failedDigests: this.mem.failed.map((f) => f.digest),
      drainedDigest: this.mem.drainedDigest,
      nodeReady: apiReachable && (await this.nodeReady()),
      trialSeenAt: this.mem.trialSeenAt,
    };
    const staged = turnRelease(o);
    o.approved = approves(spec?.approval, staged);
    o.turn = apiReachable && findTurn(this.cluster, this.cfg.machine, staged) !== undefined;
    return o;
  }

  // ------------------------------------------------------------------ report

  private async progress(): Promise<StatusExtras["progress"]> {
    const d = this.download;
    if (d === undefined) return undefined;
    const p = await this.store.progress(d.slot, d.release.digest);
    const done = Object.values(p.artifacts).reduce((n, a) => n + a.offset, 0);
    if (done !== d.done) {
      agentMetrics.downloaded(d.done, done);
      d.done = done;
      d.idleSince = bootClockMs();
    }
    const percent = d.total > 0 ? Math.floor((100 * done) / d.total) : 0;
    return { bytesDone: done, bytesTotal: d.total, percent };
  }

  private async report(o: Observed, dec: Decision): Promise<void> {
    if (!o.apiReachable || this.machine === undefined) return;
    const progress = this.lastProgress;
    const extras: StatusExtras = {
      now: new Date(),
      ...(progress ? { progress } : {}),
      ...(this.drainBlocker ? { drainBlocker: this.drainBlocker } : {}),
      ...(this.problem ? { problem: this.problem } : {}),
    };
    const next = machineStatus(this.machine.status, o, dec, this.mem, extras);
    if (sameStatus(this.machine.status, next)) return;
    try {
      // Conditioned on the resourceVersion just read; a conflict is retried with a fresh read.
      const written = await this.api.machines.updateStatus(this.cfg.machine, (cur) => ({
        ...cur,
        status: {
          ...machineStatus(cur.status, o, dec, this.mem, extras),
          lastHeartbeatTime: now(),
        },
      }));
      if (written) this.machine = written;
    } catch (e) {
      this.log.warn({ err: message(e) }, "status not written");
    }
  }

  // ------------------------------------------------------------------ act

  private async act(o: Observed, a: Action): Promise<void> {
    switch (a.kind) {
      case "wait":
      case "request-turn": // the turnRequest in the status just written is the ask
        return;
      case "withdraw":
        return this.phaseOf("withdraw", async () => {
          await this.store.transition(a.slot, { type: "withdraw" });
          await this.store.clearProgress(a.slot);
        });
      case "cancel-download":
        await this.stopDownload(a.failed ? "no progress" : "the target changed");
        if (a.failed) this.downloadFailedAt = bootClockMs();
        return;
      case "download":
        return this.startDownload(a.slot, a.release);
      case "drain":
        return this.drain(a.release);
      case "check-and-reboot":
        return this.checkAndReboot(o, a.slot, a.release);
      case "reboot":
        return this.reboot(a.reason);
      case "disarm":
        return this.phaseOf("disarm", () => this.bootloader.disarm());
      case "promote":
        return this.promote(o, a.slot);
      case "fall-back-report":
        return this.fallBack(o, a.slot);
      case "release-turn":
        return this.releaseTurn(a.reason);
      default: {
        const never: never = a;
        throw new Error(`unknown action ${JSON.stringify(never)}`);
      }
    }
  }

  private async phaseOf<T>(name: string, fn: () => Promise<T>): Promise<T> {
    const t = Date.now();
    this.log.info({ step: name }, "begin");
    try {
      const r = await fn();
      agentMetrics.step(name, Date.now() - t, true);
      this.log.info({ step: name, ms: Date.now() - t }, "end");
      return r;
    } catch (e) {
      agentMetrics.step(name, Date.now() - t, false);
      this.log.warn({ step: name, ms: Date.now() - t, err: message(e) }, "failed");
      throw e;
    }
  }

  private async startDownload(slot: Slot, release: ReleaseRef): Promise<void> {
    const source = this.cluster?.spec.releases.source;
    if (source === undefined) return;
    // Fetch and check release.yaml here first: a version absent from the channel or a digest
    // that does not match is reported before any byte goes to the slot.
    let total: number;
    try {
      const bytes = await fetchDocument(
        new URL("release.yaml", releaseBase(source, release.version)),
        MAX_RELEASE_BYTES,
      );
      total = verifyRelease(bytes, release).artifacts.reduce((n, x) => n + x.size, 0);
    } catch (e) {
      this.downloadFailedAt = bootClockMs();
      this.problem = { reason: "ReleaseRefused", message: `${release.version}: ${message(e)}` };
      this.log.warn({ version: release.version, err: message(e) }, "release refused");
      return;
    }
    // The download runs as `liken agent download` in a child process: stopping it (a new
    // target, SIGTERM) is a kill, and the slot store's marker leaves the slot withdrawn.
    const args = [likenEntry(), "agent", "download", "--config", this.cfg.file, "--source", source];
    args.push(
      "--version",
      release.version,
      "--digest",
      release.digest,
      "--running",
      otherSlot(slot),
    );
    const began = Date.now();
    const child = spawn(process.execPath, args, { stdio: ["ignore", "ignore", "pipe"] });
    let stderr = "";
    child.stderr?.on("data", (b: Buffer) => (stderr = (stderr + b.toString("utf8")).slice(-2000)));
    const exited = new Promise<number | null>((resolve) =>
      child.on("exit", (code) => resolve(code)),
    );
    const d: Download = { release, slot, child, total, exited, done: 0, idleSince: bootClockMs() };
    this.download = d;
    this.log.info(
      { version: release.version, slot, bytes: total, pid: child.pid },
      "download begins",
    );
    void exited.then((code) => {
      if (this.download === d) this.download = undefined;
      if (!child.killed) agentMetrics.step("download", Date.now() - began, code === 0);
      if (code === 0) {
        agentMetrics.downloaded(d.done, d.total);
        this.downloadFailedAt = undefined;
        this.problem = undefined;
        this.log.info({ version: release.version, slot }, "download staged and verified");
      } else if (!child.killed) {
        this.downloadFailedAt = bootClockMs();
        const last = stderr.trim().split("\n").pop() ?? "";
        this.problem = {
          reason: "DownloadFailed",
          message: `${release.version} into slot ${slot}: ${last}`,
        };
        this.log.warn({ version: release.version, code, stderr: last }, "download failed");
      }
      this.wake?.();
    });
  }

  private async stopDownload(why: string): Promise<void> {
    const d = this.download;
    if (d === undefined) return;
    this.log.info({ version: d.release.version, why }, "stopping the download");
    d.child.kill("SIGTERM");
    await d.exited;
    this.download = undefined;
  }

  private async drain(release: ReleaseRef): Promise<void> {
    await this.phaseOf("drain", async () => {
      await drainNode(this.kc, this.cfg.nodeName, {
        timeoutMs: this.cfg.timeouts.drainMs,
        signal: this.abort.signal,
        onProgress: (p) => {
          sdNotify("WATCHDOG=1");
          if (p.kind === "blocked") {
            this.drainBlocker = {
              pod: p.blocker.pod,
              ...(p.blocker.pdbs[0] ? { podDisruptionBudget: p.blocker.pdbs[0] } : {}),
              since: this.drainBlocker?.pod === p.blocker.pod ? this.drainBlocker.since : now(),
              message: p.blocker.message,
            };
          }
        },
      });
    });
    this.drainBlocker = undefined;
    this.mem = { ...this.mem, drainedDigest: release.digest };
    await this.memFile.save(this.mem);
  }

  private async stillHoldsTurn(release: ReleaseRef): Promise<boolean> {
    try {
      const c = await this.api.clusters.get(this.cfg.cluster);
      return findTurn(c, this.cfg.machine, release) !== undefined;
    } catch {
      return false;
    }
  }

  private async checkAndReboot(o: Observed, slot: Slot, release: ReleaseRef): Promise<void> {
    const result = await this.phaseOf("check slot", () =>
      verifyStagedSlot(this.cfg.slots, {
        slot,
        running: o.running.slot,
        direct: this.cfg.direct,
      }).catch((e: unknown) => ({
        ok: false,
        problems: [message(e)],
        slot,
        version: release.version,
      })),
    );
    // The turn is read again right before anything that leads to a reboot.
    if (this.stopping || !(await this.stillHoldsTurn(release))) {
      this.log.warn(
        { stopping: this.stopping },
        "not arming: stopping, or the turn is no longer recorded",
      );
      return;
    }
    if (result.ok) {
      this.mem = {
        ...this.mem,
        trial: { ...release, slot, armedAt: now() },
      };
      delete this.mem.trialSeenAt;
      await this.memFile.save(this.mem);
      await this.phaseOf("arm trial", () => this.bootloader.armTrial(slot));
      await this.reportNow("Rebooting");
      return this.reboot(`trial of ${release.version} in slot ${slot}`);
    }
    // The page: "it reboots without the trial when they do not match". Remembered as failed,
    // so the machine does not download and fail the same bytes in a loop.
    const why = `slot ${slot} does not match the staged release ${release.version}: ${result.problems.join("; ")}`;
    this.mem = {
      ...this.mem,
      failed: rememberFailed(this.mem.failed, {
        ...release,
        at: now(),
        reason: "SlotCheckMismatch",
      }),
      lastTrial: {
        ...release,
        slot,
        result: "Skipped",
        at: now(),
        reason: "SlotCheckMismatch",
        message: `${why}; rebooted without the trial`,
      },
    };
    await this.memFile.save(this.mem);
    await this.reportNow("Rebooting");
    return this.reboot(`without the trial: ${why}`);
  }

  /** Writes the status before a reboot, so the watcher sees why the machine went down. */
  private async reportNow(stage: "Rebooting"): Promise<void> {
    const o = await this.observe();
    const dec = decide(o, this.cfg.timeouts);
    await this.report(o, { ...dec, step: "Updating", stage, wantsTurn: true });
  }

  private async reboot(reason: string): Promise<void> {
    this.log.warn({ reason }, "rebooting");
    const r = this.cfg.reboot;
    if (r.exitCode !== undefined) {
      this.heartbeat?.stop();
      await this.stopDownload("reboot");
      // Every state this agent keeps is already synced (markers, grubenv, agent.json).
      process.exit(r.exitCode);
    }
    const cmd = r.command ?? ["systemctl", "reboot"];
    const code = await new Promise<number | null>((resolve) => {
      const c = spawn(cmd[0]!, cmd.slice(1), { stdio: "ignore" });
      c.on("error", () => resolve(-1));
      c.on("exit", resolve);
    });
    if (code !== 0) {
      throw new AgentError(
        "LIKEN_AGENT_REBOOT_FAILED",
        `${cmd.join(" ")} exited with ${code}; the machine did not reboot`,
        {
          retryable: true,
        },
      );
    }
    await this.pause(this.cfg.timeouts.rebootMs);
  }

  private async promote(o: Observed, slot: Slot): Promise<void> {
    const release = o.running.release;
    await this.phaseOf("promote", () => this.bootloader.confirm(slot));
    this.mem = {
      ...this.mem,
      lastTrial: {
        version: release?.version ?? "unknown",
        digest: release?.digest ?? "",
        slot,
        result: "Succeeded",
        at: now(),
        reason: "Promoted",
        message: `booted slot ${slot} once, rejoined the cluster; it is the default now`,
      },
    };
    delete this.mem.trial;
    delete this.mem.trialSeenAt;
    await this.memFile.save(this.mem);
  }

  private async fallBack(o: Observed, slot: Slot): Promise<void> {
    const marker = await this.slotView(slot);
    const t = this.mem.trial?.slot === slot ? this.mem.trial : undefined;
    const release = t ?? marker.release ?? { version: "unknown", digest: "" };
    const what =
      `the bootloader started the trial of ${release.version} in slot ${slot}` +
      `${t ? ` (armed ${t.armedAt})` : ""} and the machine came back on slot ${o.running.slot}: ` +
      "the trial boot panicked, hung until the watchdog reset it, or did not rejoin in time";
    // Remember first (a crash after this still knows), then withdraw the slot, then disarm:
    // until disarm the verdict stays trial-failed, so every step is redone after a crash.
    this.mem = {
      ...this.mem,
      failed: rememberFailed(this.mem.failed, { ...release, at: now(), reason: "TrialFellBack" }),
      lastTrial: {
        ...release,
        slot,
        result: "Failed",
        at: now(),
        reason: "TrialFellBack",
        message: what,
      },
    };
    delete this.mem.trial;
    delete this.mem.trialSeenAt;
    await this.memFile.save(this.mem);
    this.log.error({ version: release.version, slot }, what);
    await this.store.transition(slot, { type: "withdraw" });
    await this.bootloader.disarm();
  }

  private async releaseTurn(reason: string): Promise<void> {
    await this.phaseOf("give the turn back", async () => {
      const r = await uncordonNode(this.kc, this.cfg.nodeName);
      this.log.info({ uncordon: r, reason }, "turn given back");
    });
    delete this.mem.drainedDigest;
    await this.memFile.save(this.mem);
  }
}
