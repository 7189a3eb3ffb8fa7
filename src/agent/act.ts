// The agent's actions: each one named phase that logs its begin and end, small enough to test
// alone with its parts (a file-backed slot store, a bootloader over a directory, a memory file).
// The decisions they follow are pure functions in steps.ts (decide, afterSlotCheck); what they
// remember goes through memory.ts's transitions.
//
// Must never: arm a trial before the slot read back and matched and the turn was read again;
// reboot when the agent is stopping; remember a release as failed because a look failed.
//
// What only a step needs is imported when the step runs, so the idle agent never loads it:
// the drain and uncordon (with @kubernetes/client-node), the slot check, and the HTTP client
// and release parser of the release check (docs/agent.md, "Memory").
import { spawn } from "node:child_process";
import type { KubeConfig } from "@kubernetes/client-node";
import type { Logger } from "pino";
import { rfc3339 } from "../api/time.js";
import type { Cluster, DrainBlocker, ReleaseRef } from "../api/types.js";
import type { Bootloader, Slot } from "../bootloader/types.js";
import type { DriverPodSelectors } from "../drain/index.js";
import { errorCode, errorText } from "../errors.js";
import { sdNotify } from "../native/index.js";
import type { SlotStore } from "../slots/store.js";
import type { AgentConfig } from "./config.js";
import { findTurn } from "../coordinator/turn.js";
import type { DownloadSupervisor } from "./download.js";
import type { HealthGates } from "./health-run.js";
import { drainLimits, drainTimedOutRecord } from "./drain-timeout.js";
import { AgentError } from "./errors.js";
import { MAX_ARM_ATTEMPTS } from "./arming.js";
import type { GiveUpReason } from "./give-up.js";
import {
  armed,
  armShown,
  bootFilesInstalled,
  bootFilesRefused,
  bootFilesStarted,
  disarmed,
  disarming,
  drained,
  drainSkipped,
  fellBack,
  gaveUp,
  notArmed,
  notTaken,
  promoted,
  skipped,
  turnGivenBack,
  drainBegun,
  drainUndone,
  type MemoryKeeper,
} from "./memory.js";
import { NO_METER, type AgentMeter } from "./meter.js";
import type { Look } from "./look.js";
import {
  afterSlotCheck,
  beforeDrain,
  phaseTimeoutMs,
  type CheckVerdict,
  type Observed,
  type SlotCheck,
  type TurnLook,
} from "./steps.js";

export interface ActionParts {
  cfg: AgentConfig;
  log: Logger;
  /** client-node's config, for the drain and uncordon: loaded on the first turn. */
  kc: () => Promise<KubeConfig>;
  store: SlotStore;
  bootloader: Bootloader;
  memory: MemoryKeeper;
  downloads: DownloadSupervisor;
  /** The health gates of a trial boot (health-run.ts). */
  health?: HealthGates;
  /** Step durations for the metrics (silent unless metrics are served). */
  meter?: AgentMeter;
  /** Reads the turn record for `release` again, fresh from the API server. */
  turnHeld: (release: ReleaseRef) => Promise<Look<boolean>>;
  /** Writes the status that says why the machine goes down, right before a reboot. */
  reportRebooting: (reason: string) => Promise<void>;
  /** Aborted on SIGTERM: a drain stops, no trial is armed. */
  signal: AbortSignal;
  /** Waits, or less when the agent stops. */
  pause: (ms: number) => Promise<void>;
  /** Exits the process with `code` after every state is synced (reboot.exitCode). */
  exit: (code: number) => never;
}

/** Runs `fn` as a named phase: one log line at its begin, one at its end (or failure). */
export async function phase<T>(
  p: { log: Logger; meter?: AgentMeter },
  name: string,
  fn: () => Promise<T>,
): Promise<T> {
  const { log, meter = NO_METER } = p;
  const t = Date.now();
  log.info({ step: name }, "begin");
  try {
    const r = await fn();
    meter.step(name, Date.now() - t, true);
    log.info({ step: name, ms: Date.now() - t }, "end");
    return r;
  } catch (e) {
    meter.step(name, Date.now() - t, false);
    log.warn({ step: name, ms: Date.now() - t, err: errorText(e), code: errorCode(e) }, "failed");
    throw e;
  }
}

/** Resolves with `p`, or rejects with `onTimeout()` after `ms` (p keeps running). */
export function withDeadline<T>(p: Promise<T>, ms: number, onTimeout: () => Error): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(onTimeout()), ms);
  });
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
}

export class Actions {
  private blocker: DrainBlocker | undefined;
  /** A slot read-back still running past its deadline; no second one starts beside it. */
  private checking: Promise<unknown> | undefined;

  constructor(private readonly p: ActionParts) {}

  /** The eviction that holds the drain now, for status.drainBlocker. */
  get drainBlocker(): DrainBlocker | undefined {
    return this.blocker;
  }

  withdraw(slot: Slot): Promise<void> {
    return phase(this.p, "withdraw", async () => {
      await this.p.store.transition(slot, { type: "withdraw" });
      await this.p.store.clearProgress(slot);
    });
  }

  /**
   * Withdraws the trial: the intent first (a cut after the bootloader's disarm is then no
   * verdict, steps.ts trialNotArmed), then the bootloader, then memory forgets the trial.
   */
  async disarm(): Promise<void> {
    await this.p.memory.update(disarming);
    await phase(this.p, "disarm", () => this.p.bootloader.disarm());
    await this.p.memory.update(disarmed);
  }

  async stopDownload(why: string): Promise<void> {
    const d = this.p.downloads.release;
    if (d === undefined) return;
    this.p.log.info({ version: d.version, why }, "stopping the download");
    await this.p.downloads.stop();
  }

  /**
   * Fetches and checks release.yaml first: a version absent from the channel or a digest that
   * does not match is refused before any byte goes to the slot. Then starts the child.
   */
  async startDownload(
    source: string,
    slot: Slot,
    release: ReleaseRef,
    running: Slot,
    peers: readonly string[] = [],
  ): Promise<void> {
    let total: number;
    try {
      const { fetchDocument } = await import("../verify/fetch.js");
      const { MAX_RELEASE_BYTES, releaseBase, verifyRelease } =
        await import("../verify/release.js");
      const bytes = await fetchDocument(
        new URL("release.yaml", releaseBase(source, release.version)),
        MAX_RELEASE_BYTES,
      );
      total = verifyRelease(bytes, release).artifacts.reduce((n, x) => n + x.size, 0);
    } catch (e) {
      this.p.downloads.failed();
      throw new AgentError(
        "LIKEN_AGENT_RELEASE_REFUSED",
        `${release.version}: ${errorText(e)}${errorCode(e) ? ` [${errorCode(e)}]` : ""}`,
        { retryable: true, cause: e, context: { version: release.version } },
      );
    }
    const pid = this.p.downloads.start(
      { config: this.p.cfg.file, source, release, running, ...(peers.length ? { peers } : {}) },
      slot,
      total,
    );
    this.p.log.info(
      { version: release.version, slot, bytes: total, pid, peers },
      "download begins",
    );
  }

  /**
   * Part of staging, before any turn is asked for: the staged release's boot files go where the
   * bootloader loads them (systemd-boot: the ESP). A refusal that says the release cannot boot
   * here (no room on the ESP, a copy that does not match it) fails the release on this machine;
   * any other failure (the slot unreadable) is retried at the next look.
   */
  async installBootFiles(slot: Slot, release: ReleaseRef): Promise<void> {
    const { memory, log } = this.p;
    await memory.update(bootFilesStarted);
    try {
      await this.putBootFiles(slot);
    } catch (e) {
      const code = errorCode(e);
      if (code === undefined || !BOOT_FILES_REFUSED.has(code)) throw e;
      const at = rfc3339(new Date());
      await memory.update((m) =>
        bootFilesRefused(m, release, slot, at, `${errorText(e)} [${code}]`),
      );
      log.error({ version: release.version, slot, code }, memory.now.lastTrial?.message ?? "");
      return;
    }
    await memory.update((m) => bootFilesInstalled(m, slot, release));
  }

  /** The staged release's kernel and initrd into place for `slot`, loaded only when needed. */
  private async putBootFiles(slot: Slot): Promise<void> {
    await phase(this.p, "install boot files", async () => {
      const { installStagedBootFiles } = await import("./boot-files.js");
      await installStagedBootFiles(this.p.bootloader, this.p.store, slot);
    });
  }

  /**
   * Drains for `release`. `watch.stop` ends it when the target changed (drain-stop.ts): the
   * drain module undoes liken's cordon and says so, and the next look decides afresh.
   * `watch.blocked` is told each new blocker, so the status names it while the drain runs.
   */
  async drain(
    release: ReleaseRef,
    cluster: Cluster | undefined,
    watch: DrainWatch = {},
  ): Promise<void> {
    const { cfg, signal, memory, log } = this.p;
    const fresh = beforeDrain(toTurnLook(await this.p.turnHeld(release)), signal.aborted);
    if (fresh.kind === "stand-down") {
      log.warn({ why: fresh.why }, "not draining");
      return;
    }
    const { drainNode } = await import("../drain/index.js");
    const kc = await this.p.kc();
    const limits = drainLimits(cluster, cfg.timeouts.drainMs);
    const turn = findTurn(cluster, cfg.machine, release);
    // Written before the first cordon: a turn taken back mid-drain, or an agent killed in it,
    // still finds the node owned up to (steps.ts disrupted) and given back before it asks again.
    await memory.update((m) => drainBegun(m, release.digest));
    const outcome = await phase(this.p, "drain", () =>
      drainNode(kc, cfg.nodeName, {
        ...drainOptions(cfg),
        timeoutMs: limits.timeoutMs,
        signal,
        ...(watch.stop ? { stop: watch.stop } : {}),
        onProgress: (p) => {
          sdNotify("WATCHDOG=1");
          if (p.kind !== "blocked") return;
          const b = p.blocker;
          const before = this.blocker;
          this.blocker = {
            pod: b.pod,
            ...(b.pdbs[0] ? { podDisruptionBudget: b.pdbs[0] } : {}),
            since: before?.pod === b.pod ? before.since : rfc3339(new Date()),
            message: b.message,
          };
          if (!sameBlocker(before, this.blocker)) watch.blocked?.();
        },
      }),
    ).then(
      () => "drained" as const,
      async (e: unknown) => {
        if (errorCode(e) === "LIKEN_DRAIN_STOPPED") {
          // Not a failure: the target changed; the drain module undid liken's cordon.
          log.info({ err: errorText(e) }, "drain stopped: the target changed");
          return "stopped" as const;
        }
        // onDrainTimeout Skip: only the deadline, only with the turn in hand; anything else
        // (an abort, a refused eviction, Stall) goes on as before.
        if (!limits.skip || errorCode(e) !== "LIKEN_DRAIN_DEADLINE" || turn === undefined) throw e;
        await this.skipTurn(release, turn.grantedAt, errorText(e));
        return "skipped" as const;
      },
    );
    if (outcome === "skipped") return;
    this.blocker = undefined;
    if (outcome === "stopped") {
      await memory.update(drainUndone); // the drain module undid liken's cordon
      return;
    }
    await memory.update((m) => drained(m, release.digest));
  }

  /** The drain timed out (Skip): uncordon, remember the turn given back (reported in status). */
  private async skipTurn(release: ReleaseRef, grantedAt: string, message: string): Promise<void> {
    const { cfg, log, memory } = this.p;
    const { uncordonNode } = await import("../drain/index.js");
    const kc = await this.p.kc();
    const record = drainTimedOutRecord(
      release,
      grantedAt,
      this.blocker,
      message,
      rfc3339(new Date()),
    );
    this.blocker = undefined;
    await phase(this.p, "give the turn back: the drain timed out", () =>
      uncordonNode(kc, cfg.nodeName),
    );
    await memory.update((m) => drainSkipped(m, record));
    log.warn(
      { pod: record.pod, pdb: record.podDisruptionBudget },
      "drain timed out; turn given back, asking again",
    );
  }

  /**
   * Reads the staged slot back within slotCheckMs and the turn again, then follows
   * afterSlotCheck(): arm and reboot, reboot without the trial, or leave it to the next tick.
   */
  async checkAndReboot(o: Observed, slot: Slot, release: ReleaseRef): Promise<void> {
    const check = await phase(this.p, "check slot", () => this.checkSlot(slot, o.running.slot));
    const turn = toTurnLook(await this.p.turnHeld(release));
    const verdict = afterSlotCheck(check, turn, this.p.signal.aborted, slot, release);
    await this.follow(verdict, slot, release, o.bootId);
  }

  /** Carries out a check-and-reboot verdict; `bootId`: this boot, recorded with the trial. */
  async follow(v: CheckVerdict, slot: Slot, release: ReleaseRef, bootId?: string): Promise<void> {
    const { memory, log, bootloader } = this.p;
    const at = rfc3339(new Date());
    switch (v.kind) {
      case "stand-down":
        log.warn({ why: v.why }, "not arming the trial");
        return;
      case "retry":
        throw new AgentError(
          "LIKEN_AGENT_SLOT_CHECK_FAILED",
          `${v.why}${v.code ? ` [${v.code}]` : ""}; nothing is remembered, tried again at the next look`,
          { retryable: true, context: { slot, version: release.version, cause: v.code } },
        );
      case "arm":
        // systemd-boot loads the kernel from the ESP: installed when the slot was staged, and
        // checked again here, before arming; what a kill midway or a person changed since is
        // installed again (docs/machine.md).
        if (bootloader.installBootFiles !== undefined) await this.putBootFiles(slot);
        // The intent, recorded before the bootloader is touched: after a crash in between, the
        // agent still knows which release it meant to try, and that it never saw it armed.
        await memory.update((m) => armed(m, release, slot, at, bootId));
        await phase(this.p, "arm trial", () => this.armAndShow(slot, release));
        await this.p.reportRebooting(v.why);
        return this.reboot(v.why);
      case "skip-trial":
        // The page: "it reboots without the trial when they do not match".
        await memory.update((m) => skipped(m, release, slot, at, v.why));
        await this.p.reportRebooting(`without the trial: ${v.why}`);
        return this.reboot(`without the trial: ${v.why}`);
      default: {
        const never: never = v;
        throw new Error(`unknown verdict ${JSON.stringify(never)}`);
      }
    }
  }

  /**
   * Arms the trial and reads the bootloader back: only a trial it shows armed is recorded as
   * shown (its outcome is then a verdict on the release). An arm that fails, or reads back
   * anything else, is counted as not armed (arming.ts: no verdict, tried again, bounded), what
   * half of it may have left is disarmed, and the step fails with LIKEN_AGENT_TRIAL_NOT_ARMED.
   */
  private async armAndShow(slot: Slot, release: ReleaseRef): Promise<void> {
    const { memory, bootloader, log } = this.p;
    let why: string;
    try {
      await bootloader.armTrial(slot);
      const r = await bootloader.read();
      if (r.armed === slot) {
        await memory.update((m) => armShown(m, rfc3339(new Date())));
        return;
      }
      why = `${bootloader.backend} reads back ${r.shows ?? `armed ${r.armed ?? "none"}`}`;
    } catch (e) {
      why = `${errorText(e)}${errorCode(e) ? ` [${errorCode(e)}]` : ""}`;
    }
    await memory.update((m) => notArmed(m, why, rfc3339(new Date())));
    const attempts = memory.now.noVerdict?.attempts ?? 1;
    try {
      await this.disarm();
    } catch (e) {
      // The trial stays recorded as being withdrawn, never shown: a later boot that does not
      // start it is no verdict (steps.ts trialNotArmed) and is not counted a second time.
      log.warn({ err: errorText(e), code: errorCode(e) }, "disarm after a failed arm failed");
    }
    throw new AgentError(
      "LIKEN_AGENT_TRIAL_NOT_ARMED",
      `the trial of ${release.version} in slot ${slot} could not be armed (attempt ${attempts} ` +
        `of ${MAX_ARM_ATTEMPTS}): ${why}; no verdict on the release, armed again at the next ` +
        "look while attempts remain",
      { retryable: true, context: { slot, version: release.version, attempts } },
    );
  }

  /**
   * The read-back of the slot against its staged release, within slotCheckMs. A throw (EIO, the
   * slot not staged) or the deadline is "could not look", never a mismatch: only bytes that read
   * back wrong condemn a release.
   */
  private async checkSlot(slot: Slot, running: Slot): Promise<SlotCheck> {
    const { cfg } = this.p;
    if (this.checking !== undefined) {
      // The native read cannot be cancelled: a second one beside it would only compete for the disk.
      const message = "the previous read-back, past its deadline, still runs";
      return { kind: "unread", code: "LIKEN_AGENT_SLOT_CHECK_TIMEOUT", message };
    }
    const ms = phaseTimeoutMs("CheckingSlot", cfg.timeouts);
    // Loaded when it runs: the agent's idle loop does not need the slot check's modules.
    const reading = import("../slots/check.js").then(({ verifyStagedSlot }) =>
      verifyStagedSlot(cfg.slots, { slot, running, direct: cfg.direct }),
    );
    const late = (): Error =>
      new AgentError(
        "LIKEN_AGENT_SLOT_CHECK_TIMEOUT",
        `reading slot ${slot} back took longer than timeouts.slotCheckMs (${ms} ms)`,
        { retryable: true },
      );
    try {
      const r = await withDeadline(reading, ms, late);
      return r.ok ? { kind: "matched" } : { kind: "mismatch", problems: r.problems };
    } catch (e) {
      if (errorCode(e) === "LIKEN_AGENT_SLOT_CHECK_TIMEOUT") {
        this.checking = reading.catch(() => undefined).finally(() => (this.checking = undefined));
      }
      return { kind: "unread", code: errorCode(e), message: errorText(e) };
    }
  }

  /** Runs the reboot; with a command, waits rebootMs for the machine to go down. */
  async reboot(reason: string): Promise<void> {
    const { cfg, log } = this.p;
    log.warn({ reason }, "rebooting");
    const r = cfg.reboot;
    if (r.exitCode !== undefined) {
      await this.stopDownload("reboot");
      // Every state this agent keeps is already synced (markers, bootloader, agent.json).
      return this.p.exit(r.exitCode);
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
        { retryable: true },
      );
    }
    // The machine goes down while this waits; still running after the Rebooting phase's
    // timeout, the reboot failed, and the status must say so.
    const ms = phaseTimeoutMs("Rebooting", cfg.timeouts);
    await this.p.pause(ms);
    if (this.p.signal.aborted) return;
    throw new AgentError(
      "LIKEN_AGENT_REBOOT_FAILED",
      `${cmd.join(" ")} succeeded but the machine still runs ${ms} ms later (timeouts.rebootMs)`,
      { retryable: true },
    );
  }

  /** The trial boot did not prove itself in time: say why for the report, then reboot. */
  async giveUpTrial(reason: string, failure?: GiveUpReason): Promise<void> {
    await this.p.memory.update((m) => gaveUp(m, reason, failure));
    return this.reboot(reason);
  }

  /** Runs the trial boot's health gates; decide() reads the result at the next look. */
  async checkHealth(cluster: Cluster | undefined): Promise<void> {
    const health = this.p.health;
    if (health === undefined) return;
    await phase(this.p, "health gates", () => health.check(cluster));
  }

  async promote(o: Observed, slot: Slot): Promise<void> {
    await phase(this.p, "promote", () => this.p.bootloader.confirm(slot));
    const at = rfc3339(new Date());
    await this.p.memory.update((m) => promoted(m, o.running.release, slot, at));
  }

  /**
   * Back on the old slot after the bootloader fell back. Remember first (a crash after this
   * still knows), then withdraw the slot, then disarm: until disarm the verdict stays
   * trial-failed, so every step is redone after a crash.
   */
  async fallBack(o: Observed, slot: Slot): Promise<void> {
    const { memory, store, bootloader, log } = this.p;
    const marker = o.other.slot === slot ? o.other.release : undefined;
    const at = rfc3339(new Date());
    await memory.update((m) => fellBack(m, slot, o.running.slot, marker, at));
    const t = memory.now.lastTrial;
    log.error({ version: t?.version, slot }, t?.message ?? "the trial fell back");
    await store.transition(slot, { type: "withdraw" });
    await bootloader.disarm();
  }

  /**
   * The bootloader did not take the trial (steps.ts trialNotTaken): remember and report first,
   * then disarm, so a later reboot by hand boots the old slot and not a trial nobody watches;
   * the turn is given back by the next look (the release now counts as failed). No reboot.
   */
  async notTaken(o: Observed, slot: Slot): Promise<void> {
    const { memory, bootloader, log } = this.p;
    const record = await bootloader.read();
    const seen = { backend: bootloader.backend, running: o.running.slot, shows: record.shows };
    await memory.update((m) => notTaken(m, seen, rfc3339(new Date())));
    const t = memory.now.lastTrial;
    log.error({ version: t?.version, slot }, t?.message ?? "the trial was not taken");
    await this.disarm();
  }

  /**
   * A later boot found the trial recorded but never shown armed, and nothing armed (steps.ts
   * trialNotArmed): counted as an attempt without a verdict (the release is not failed), then
   * disarmed (what half an arm left), so the next look arms it again within the turn, or holds
   * once MAX_ARM_ATTEMPTS are used up (arming.ts). No reboot.
   */
  async notArmed(o: Observed, slot: Slot): Promise<void> {
    const { memory, bootloader, log } = this.p;
    const record = await bootloader.read();
    const why =
      `the machine rebooted (boot ${o.bootId}) before ${bootloader.backend} was shown armed, ` +
      `and booted slot ${o.running.slot}${record.shows ? ` (${record.shows})` : ""}`;
    await memory.update((m) => notArmed(m, why, rfc3339(new Date())));
    log.warn({ slot, ...memory.now.noVerdict }, "the trial was never armed; no verdict");
    await this.disarm();
  }

  async releaseTurn(reason: string): Promise<void> {
    const { cfg, log, memory } = this.p;
    await phase(this.p, "give the turn back", async () => {
      const { uncordonNode } = await import("../drain/index.js");
      const r = await uncordonNode(await this.p.kc(), cfg.nodeName);
      log.info({ uncordon: r, reason }, "turn given back");
    });
    await memory.update(turnGivenBack);
  }
}

/** What the daemon watches a drain with (see Actions.drain). */
export interface DrainWatch {
  stop?: AbortSignal;
  blocked?: () => void;
}

function sameBlocker(a: DrainBlocker | undefined, b: DrainBlocker): boolean {
  return (
    a !== undefined &&
    a.pod === b.pod &&
    a.podDisruptionBudget === b.podDisruptionBudget &&
    a.message === b.message
  );
}

/** The bootloader's refusals that say the staged release cannot boot on this machine. */
const BOOT_FILES_REFUSED: ReadonlySet<string> = new Set([
  "LIKEN_BOOTLOADER_ESP_FULL",
  "LIKEN_BOOTLOADER_BOOT_FILES_INVALID",
  "LIKEN_BOOTLOADER_BOOT_FILE_MISMATCH",
]);

/** What the agent's config says about its drain: the deadline, and who runs each DRA driver. */
export function drainOptions(cfg: Pick<AgentConfig, "timeouts" | "driverPods">): {
  timeoutMs: number;
  driverPods: DriverPodSelectors;
} {
  return { timeoutMs: phaseTimeoutMs("Draining", cfg.timeouts), driverPods: cfg.driverPods };
}

function toTurnLook(l: Look<boolean>): TurnLook {
  if (l.ok) return l.value ? { kind: "held" } : { kind: "gone" };
  return { kind: "unread", code: l.error.code, message: l.error.message };
}
