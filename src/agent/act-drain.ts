// The drain step of the agent's actions: on the turn read again fresh, cordon and drain the
// node for the staged release, name the pod that holds it (status.drainBlocker), and at the
// deadline either keep the turn (Stall) or give it back and uncordon (Skip). What it remembers
// goes through memory.ts's transitions; the drain itself is loaded when a drain runs.
import type { Cluster, DrainBlocker, ReleaseRef } from "../api/types.js";
import { rfc3339 } from "../api/time.js";
import { findTurn } from "../coordinator/turn.js";
import type { DriverPodSelectors } from "../drain/index.js";
import { errorCode, errorText } from "../errors.js";
import { sdNotify } from "../native/index.js";
import { phase, type ActionParts } from "./act-parts.js";
import type { AgentConfig } from "./config.js";
import { drainLimits, drainTimedOutRecord } from "./drain-timeout.js";
import { drainBegun, drained, drainSkipped, drainUndone } from "./memory.js";
import { phaseTimeoutMs } from "./phases.js";
import { beforeDrain, toTurnLook } from "./step-verdicts.js";

/** Drains for a turn, and keeps the eviction that holds the drain now. */
export class DrainStep {
  private blocker: DrainBlocker | undefined;

  constructor(private readonly p: ActionParts) {}

  /** The eviction that holds the drain now, for status.drainBlocker. */
  get drainBlocker(): DrainBlocker | undefined {
    return this.blocker;
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
    const begun = memory.now.drainBegunDigest === release.digest;
    const turnNow = toTurnLook(await this.p.turnHeld(release));
    const fresh = beforeDrain(turnNow, signal.aborted, begun);
    if (fresh.kind === "stand-down") {
      log.warn({ why: fresh.why }, "not draining");
      return;
    }
    const { drainNode } = await import("../drain/index.js");
    const kc = await this.p.kc();
    const limits = drainLimits(cluster, cfg.timeouts.drainMs);
    const lbSeconds = cluster?.spec.disruption?.excludeFromLoadBalancersSeconds ?? 0;
    const turn = findTurn(cluster, cfg.machine, release);
    // Written before the first cordon: a turn taken back mid-drain, or an agent killed in it,
    // still finds the node owned up to (give-back.ts disrupted) and given back before it asks
    // again.
    await memory.update((m) => drainBegun(m, release.digest));
    const outcome = await phase(this.p, "drain", () =>
      drainNode(kc, cfg.nodeName, {
        ...drainOptions(cfg),
        timeoutMs: limits.timeoutMs,
        loadBalancerDelayMs: lbSeconds * 1000,
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

/** What the agent's config says about its drain: the deadline, and who runs each DRA driver. */
export function drainOptions(cfg: Pick<AgentConfig, "timeouts" | "driverPods">): {
  timeoutMs: number;
  driverPods: DriverPodSelectors;
} {
  return { timeoutMs: phaseTimeoutMs("Draining", cfg.timeouts), driverPods: cfg.driverPods };
}
