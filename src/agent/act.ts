// The agent's actions: each one named phase that logs its begin and end, small enough to test
// alone with its parts (a file-backed slot store, a bootloader over a directory, a memory file).
// The decisions they follow are pure functions in steps.ts (decide) and step-verdicts.ts
// (beforeDrain, afterSlotCheck); what they remember goes through memory.ts's transitions.
//
// Must never: arm a trial before the slot read back and matched and the turn was read again;
// reboot when the agent is stopping; remember a release as failed because a look failed.
//
// What only a step needs is imported when the step runs, so the idle agent never loads it:
// the drain and uncordon (with @kubernetes/client-node), the slot check, and the HTTP client
// and release parser of the release check (docs/agent.md, "Memory").
//
// The drain (act-drain.ts) and the check-and-reboot (act-check.ts) are steps of their own; the
// parts every action runs on and its named phase are in act-parts.ts.
import { spawn } from "node:child_process";
import { rfc3339 } from "../api/time.js";
import type { Cluster, DrainBlocker, ReleaseRef } from "../api/types.js";
import type { Slot } from "../bootloader/types.js";
import { errorCode, errorText } from "../errors.js";
import { CheckAndReboot } from "./act-check.js";
import { DrainStep, type DrainWatch } from "./act-drain.js";
import { phase, type ActionParts } from "./act-parts.js";
import { AgentError } from "./errors.js";
import type { GiveUpReason } from "./give-up.js";
import {
  bootFilesInstalled,
  bootFilesRefused,
  bootFilesStarted,
  disarmed,
  disarming,
  gaveUp,
  notArmed,
  promoted,
  turnGivenBack,
} from "./memory.js";
import { fellBack, notTaken } from "./memory-verdicts.js";
import type { Observed } from "./decision.js";
import { phaseTimeoutMs } from "./phases.js";
import type { CheckVerdict } from "./step-verdicts.js";

// The names the daemon and the tests import from here, wherever they live now.
export { phase, withDeadline, type ActionParts } from "./act-parts.js";
export { drainOptions, type DrainWatch } from "./act-drain.js";

export class Actions {
  private readonly drains: DrainStep;
  private readonly checks: CheckAndReboot;

  constructor(private readonly p: ActionParts) {
    this.drains = new DrainStep(p);
    this.checks = new CheckAndReboot(p, {
      putBootFiles: (slot) => this.putBootFiles(slot),
      disarm: () => this.disarm(),
      reboot: (reason) => this.reboot(reason),
    });
  }

  /** The eviction that holds the drain now, for status.drainBlocker. */
  get drainBlocker(): DrainBlocker | undefined {
    return this.drains.drainBlocker;
  }

  withdraw(slot: Slot): Promise<void> {
    return phase(this.p, "withdraw", async () => {
      await this.p.store.transition(slot, { type: "withdraw" });
      await this.p.store.clearProgress(slot);
    });
  }

  /**
   * Withdraws the trial: the intent first (a cut after the bootloader's disarm is then no
   * verdict, trial-armed.ts trialNotArmed), then the bootloader, then memory forgets the trial.
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
   * Drains for `release` (act-drain.ts). `watch.stop` ends it when the target changed
   * (drain-stop.ts); `watch.blocked` is told each new blocker.
   */
  drain(release: ReleaseRef, cluster: Cluster | undefined, watch: DrainWatch = {}): Promise<void> {
    return this.drains.drain(release, cluster, watch);
  }

  /** Reads the staged slot back and the turn again, then arms and reboots (act-check.ts). */
  checkAndReboot(o: Observed, slot: Slot, release: ReleaseRef): Promise<void> {
    return this.checks.checkAndReboot(o, slot, release);
  }

  /** Carries out a check-and-reboot verdict; `bootId`: this boot, recorded with the trial. */
  follow(v: CheckVerdict, slot: Slot, release: ReleaseRef, bootId?: string): Promise<void> {
    return this.checks.follow(v, slot, release, bootId);
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
    // A flag this agent did not arm is stale (memory-verdicts.ts staleTrialFlag): the staged slot is
    // not what fell back, so it is kept; only the flag goes.
    const ours = memory.now.trial?.slot === slot;
    await memory.update((m) => fellBack(m, slot, o.running.slot, marker, at));
    const t = memory.now.lastTrial;
    log.error({ version: t?.version, slot }, t?.message ?? "the trial fell back");
    if (ours) await store.transition(slot, { type: "withdraw" });
    await bootloader.disarm();
  }

  /**
   * The bootloader did not take the trial (trial-armed.ts trialNotTaken): remember and report
   * first, then disarm, so a later reboot by hand boots the old slot and not a trial nobody
   * watches; the turn is given back by the next look (the release now counts as failed). No
   * reboot.
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
   * A later boot found the trial recorded but never shown armed, and nothing armed
   * (trial-armed.ts trialNotArmed): counted as an attempt without a verdict (the release is not
   * failed), then disarmed (what half an arm left), so the next look arms it again within the
   * turn, or holds once MAX_ARM_ATTEMPTS are used up (arming.ts). No reboot.
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

/** The bootloader's refusals that say the staged release cannot boot on this machine. */
const BOOT_FILES_REFUSED: ReadonlySet<string> = new Set([
  "LIKEN_BOOTLOADER_ESP_FULL",
  "LIKEN_BOOTLOADER_BOOT_FILES_INVALID",
  "LIKEN_BOOTLOADER_BOOT_FILE_MISMATCH",
]);
