// The agent's look at the world, once per tick: the running slot (kernel command line), the
// bootloader's record, both slot markers, the Cluster, its Machine and its Node, and what the
// agent remembers. It returns a complete Observed for decide(), plus the objects the report
// writes against. A failed look at the API says why in the log; it is never read as a verdict.
//
// The Cluster, the Machine and the Node come from the agent's watches (view.ts), not from a
// read per tick: an idle agent asks the API server nothing here. Only the turn record right
// before arming is read fresh (turnHeld).
import { readFile } from "node:fs/promises";
import type { Logger } from "pino";
import type { AgentApi } from "./api.js";
import {
  ANNOTATION_RETRY,
  type Cluster,
  type Machine,
  sameRelease,
  type RebootTurn,
  type Registration,
  type ReleaseRef,
} from "../api/types.js";
import { mayRegister, registration } from "./registration.js";
import { effectiveTarget } from "../release-decision/view.js";
import type { Bootloader } from "../bootloader/types.js";
import { judgeBoot, otherSlot, runningSlotFromCmdline, type Slot } from "../bootloader/types.js";
import { findTurn, takenBackOf, turnPausedOf } from "../coordinator/turn.js";
import type { Blocking, BlockingPods } from "./blocking-pods.js";
import type { SlotStore } from "../slots/store.js";
import { errorText } from "../errors.js";
import { bootClockMs } from "./clock.js";
import { AgentError } from "./errors.js";
import { isSkippedTurn } from "./drain-timeout.js";
import type { AgentConfig } from "./config.js";
import type { DownloadBytes, DownloadSupervisor, Durable } from "./download.js";
import type { HealthGates } from "./health-run.js";
import { nodeBootSeen, retried, trialSeen, type Memory, type MemoryKeeper } from "./memory.js";
import type { NodeSeen } from "./rejoin.js";
import { turnRelease } from "./status.js";
import type { Observed, SlotView } from "./steps.js";
import { look, type Look } from "./look.js";
import type { ApiView } from "./view.js";

export interface Observation {
  o: Observed;
  /** The objects as read this tick (undefined when the API could not be read). */
  cluster: Cluster | undefined;
  machine: Machine | undefined;
  progress: DownloadBytes | undefined;
}

/** The log message that names this boot's id, once per agent process. */
export const BOOT_ID_LOG_MESSAGE = "this boot";

export interface ObserverParts {
  cfg: AgentConfig;
  log: Logger;
  api: AgentApi;
  view: ApiView;
  bootloader: Bootloader;
  store: SlotStore;
  memory: MemoryKeeper;
  downloads: DownloadSupervisor;
  /** The health gates, looked at on a trial boot only. */
  health?: HealthGates;
  /** The Cluster's blocking pods on this node, looked at while the machine waits to ask. */
  blocking?: BlockingPods;
}

/** What the slot's progress file says of the download in progress (download.ts, Durable). */
async function durableOf(store: SlotStore, slot: Slot, digest: string): Promise<Durable> {
  const saved = await store.progress(slot, digest);
  const p = Object.values(saved.artifacts);
  const sum = (f: (a: (typeof p)[number]) => number): number => p.reduce((n, a) => n + f(a), 0);
  return {
    done: sum((a) => a.offset),
    reused: sum((a) => a.reused ?? 0),
    fetched: sum((a) => a.fetched ?? 0),
    // An index pass over the running slot before anything is written (src/slots/running-index.ts).
    ...(saved.indexing === undefined ? {} : { indexing: saved.indexing }),
  };
}

export class Observer {
  /** What the last look said about the API server, to log only its changes. */
  private reachable = false;
  /**
   * The kernel command line, read at the first look: it is fixed for a boot, and this process
   * lives within one boot (a reboot starts the agent again). Read every tick, it was the
   * largest part of an idle agent's file reads (docs/agent.md, "Where an idle agent's CPU goes").
   */
  private cmdline: string | undefined;
  /** This boot's id, read at the first look for the same reason. */
  private bootId: string | undefined;

  constructor(private readonly p: ObserverParts) {}

  async observe(): Promise<Observation> {
    const { cfg, memory, downloads } = this.p;
    const { runningSlot, bootId } = await this.thisBoot();
    const boot = judgeBoot(await this.p.bootloader.read(), runningSlot);
    if (boot.kind === "on-trial") await memory.update((m) => trialSeen(m, bootClockMs()));
    const progress = await downloads.progress((slot, digest) =>
      durableOf(this.p.store, slot, digest),
    );
    const api = await this.readApi();
    const machine = api?.machine;
    await this.retryIfAsked(machine);
    const node = await this.nodeOnTrial(api !== undefined, boot.kind === "on-trial");
    const running = await this.slotView(runningSlot);
    const other = await this.slotView(otherSlot(runningSlot));
    const mem = memory.now; // after nodeBootSeen, so this tick's bootID is among those seen
    const staged = turnRelease({ boot, running, other });
    const target = targetOf(api?.cluster);
    const o: Observed = {
      now: bootClockMs(),
      apiReachable: api !== undefined,
      boot,
      running,
      other,
      target,
      ...peopleOf(machine),
      // A turn given back on a drain timeout is not held, though its record may linger.
      turn: heldTurn(findTurn(api?.cluster, cfg.machine, staged)?.grantedAt, mem.drainTimedOut),
      download: downloads.release,
      downloadIdleSince: downloads.idleSince,
      downloadFailedAt: downloads.failedAt,
      failedDigests: mem.failed.map((f) => f.digest),
      drainedDigest: mem.drainedDigest,
      ...(mem.drainBegunDigest !== undefined ? { drainBegunDigest: mem.drainBegunDigest } : {}),
      ...takenBackOf(api?.cluster, cfg.machine),
      ...turnPausedOf(api?.cluster, cfg.machine, staged),
      ...(await this.blockingOf(api?.cluster, target, other, mem)),
      bootFilesDue: bootFilesDue(this.p.bootloader, other, mem),
      ...nodeObserved(cfg.nodeName, node, mem),
      trialSeenAt: mem.trialSeenAt,
      bootId,
      ...trialFacts(mem),
      ...(boot.kind === "on-trial" && this.p.health !== undefined
        ? { health: this.p.health.seen(api?.cluster) }
        : {}),
    };
    return { o, cluster: api?.cluster, machine, progress };
  }

  /**
   * The Node as the watch has it (undefined while the API is down). On a trial boot, the
   * bootID it shows is remembered, across restarts of the agent: a trial given up names every
   * boot its Node showed (rejoin.ts).
   */
  private async nodeOnTrial(
    reachable: boolean,
    onTrial: boolean,
  ): Promise<Look<NodeSeen | undefined> | undefined> {
    if (!reachable) return undefined;
    const node = this.p.view.node;
    const seen = node.ok ? node.value : undefined;
    if (onTrial && seen !== undefined) {
      await this.p.memory.update((m) => nodeBootSeen(m, seen.bootId));
    }
    return node;
  }

  /** The slot this boot runs from and the boot's id: fixed for the life of this process. */
  private async thisBoot(): Promise<{ runningSlot: Slot; bootId: string }> {
    const { cfg } = this.p;
    this.cmdline ??= await readFile(cfg.cmdline, "utf8");
    if (this.bootId === undefined) {
      this.bootId = await readBootId(cfg.bootId);
      // Once per process: what the kubelet of this boot must report as the Node's bootID for a
      // trial to count as rejoined (rejoin.ts). A test's stand-in kubelet reads it here too.
      this.p.log.info({ bootId: this.bootId }, BOOT_ID_LOG_MESSAGE);
    }
    return { runningSlot: runningSlotFromCmdline(this.cmdline), bootId: this.bootId };
  }

  /** A new value of the liken.sh/retry annotation: forget the failed releases, once. */
  private async retryIfAsked(machine: Machine | undefined): Promise<void> {
    const { memory, log } = this.p;
    const retry = machine?.metadata.annotations?.[ANNOTATION_RETRY];
    if (retry === undefined || retry === memory.now.retryHandled) return;
    log.info({ retry, forgotten: memory.now.failed.map((f) => f.version) }, "retry asked");
    await memory.update((m) => retried(m, retry));
  }

  /**
   * The blocking pods on this node, looked at only while the machine is staged for the target
   * and has begun no drain (blocking-pods.ts): what it has begun it finishes or gives back.
   */
  private async blockingOf(
    cluster: Cluster | undefined,
    target: ReleaseRef | undefined,
    other: SlotView,
    mem: Memory,
  ): Promise<{ blocking?: Blocking }> {
    const waiting =
      other.state === "staged" &&
      sameRelease(other.release, target) &&
      mem.drainBegunDigest === undefined &&
      mem.drainedDigest === undefined;
    const blocking = await this.p.blocking?.look(cluster, waiting);
    return blocking === undefined ? {} : { blocking };
  }

  /** The turn record for `release`, read fresh (right before anything that leads to a reboot). */
  async turnHeld(release: ReleaseRef): Promise<Look<RebootTurn | undefined>> {
    const { api, cfg } = this.p;
    const c = await look({ verb: "get", kind: "Cluster", name: cfg.cluster }, () =>
      api.clusters.get(cfg.cluster),
    );
    return c.ok ? { ok: true, value: findTurn(c.value, cfg.machine, release) } : c;
  }

  private async slotView(slot: Slot): Promise<SlotView> {
    const m = await this.p.store.marker(slot);
    return {
      slot,
      state: m.state,
      ...(m.version && m.releaseDigest
        ? { release: { version: m.version, digest: m.releaseDigest } }
        : {}),
    };
  }

  /**
   * The Cluster and this Machine as the watches have them (the Machine registered when the
   * watch listed none); undefined while the API is not reachable (view.ts says when).
   */
  private async readApi(): Promise<{ cluster: Cluster | undefined; machine: Machine } | undefined> {
    const { view, log } = this.p;
    const reachable = view.reachable;
    if (reachable !== this.reachable) {
      // The cause and its code: no answer is the network or the server; a 403 or a bug is not
      // "unreachable", and the log must say which.
      const e = view.failure;
      if (reachable) log.info("API server reachable");
      else log.warn({ err: e?.message, code: e?.code }, "cannot read the Cluster or the Machine");
      this.reachable = reachable;
    }
    if (!reachable) return undefined;
    const cluster = view.cluster;
    let machine = view.machine;
    if (machine === undefined) {
      if (!view.machineMissing) return undefined;
      const r = await look({ verb: "create", kind: "Machine", name: this.p.cfg.machine }, () =>
        this.register(),
      );
      if (!r.ok) {
        log.warn({ err: r.error.message }, "Machine not registered");
        return undefined;
      }
      // Waiting for the Node, whose labels decide the role (registration.ts).
      if (r.value === undefined) return undefined;
      machine = r.value;
      view.wrote(machine);
    }
    return { cluster, machine };
  }

  /**
   * Creates the Machine with the role its Node says (registration.ts), then records where the
   * role and policy came from in status.registration (the Role-From column). The status write
   * is conditioned like every other; if it fails, the next status write carries it (status.ts).
   */
  private async register(): Promise<Machine | undefined> {
    const { api, cfg, log } = this.p;
    const node = await api.nodes.find(cfg.nodeName).catch((e: unknown) => {
      log.warn({ node: cfg.nodeName, err: errorText(e) }, "cannot read the Node to register");
      return undefined;
    });
    const waited = performance.now() - this.startedAt;
    if (cfg.role === undefined && !mayRegister(node !== undefined, waited)) {
      if (!this.waitSaid)
        log.info(
          { node: cfg.nodeName },
          "waiting for the Node to register the Machine: its labels decide the role",
        );
      this.waitSaid = true;
      return undefined;
    }
    const r = registration({
      ...(cfg.role === undefined ? {} : { role: cfg.role }),
      ...(cfg.rebootPolicy === undefined ? {} : { rebootPolicy: cfg.rebootPolicy }),
      nodeLabels: node === undefined ? undefined : (node.metadata.labels ?? {}),
    });
    log.info({ machine: cfg.machine, ...r }, "registering the Machine");
    const created = await api.machines.create({
      apiVersion: "liken.sh/v1alpha1",
      kind: "Machine",
      metadata: { name: cfg.machine },
      spec: {
        cluster: cfg.cluster,
        nodeName: cfg.nodeName,
        role: r.role,
        rebootPolicy: r.rebootPolicy,
      },
    });
    this.registered = {
      roleFrom: r.roleFrom,
      rebootPolicyFrom: r.rebootPolicyFrom,
      at: created.metadata.creationTimestamp ?? new Date().toISOString(),
    };
    return created;
  }

  /** Where the registered Machine's role came from, for the status (until it is written). */
  registered: Registration | undefined;
  /** When this agent started (monotonic): it waits NODE_WAIT_MS at most for its Node to register. */
  private readonly startedAt = performance.now();
  private waitSaid = false;
}

/**
 * The Node as read, or why there is none (not looked at while the API is down: then
 * apiReachable says so). An unreadable Node is never read as a Node that is not Ready.
 */
export function nodeFacts(
  node: Look<NodeSeen | undefined> | undefined,
): Pick<Observed, "node" | "nodeUnread"> {
  if (node === undefined) return { node: undefined, nodeUnread: undefined };
  return node.ok
    ? { node: node.value, nodeUnread: undefined }
    : { node: undefined, nodeUnread: `${node.error.message} [${node.error.code}]` };
}

/** What decide() sees of the Node and of this boot's start (rejoin.ts). */
function nodeObserved(
  nodeName: string,
  node: Look<NodeSeen | undefined> | undefined,
  mem: Memory,
): Pick<Observed, "nodeName" | "node" | "nodeUnread" | "bootStartedAt" | "nodeBootIds"> {
  const ids = mem.trial?.nodeBootIds;
  return {
    nodeName,
    ...nodeFacts(node),
    bootStartedAt: Date.now() - bootClockMs(),
    ...(ids === undefined ? {} : { nodeBootIds: ids }),
  };
}

function heldTurn(grantedAt: string | undefined, skipped: Memory["drainTimedOut"]): boolean {
  return grantedAt !== undefined && !isSkippedTurn(grantedAt, skipped);
}

/**
 * The Cluster's target: spec.version with its catalog digest, or while a revert is in force the
 * release it goes back to, and none for a revoked release (src/release-decision/view.ts).
 */
export function targetOf(cluster: Cluster | undefined): ReleaseRef | undefined {
  return effectiveTarget(cluster);
}

/**
 * This boot's identity: the kernel's random boot_id, new at every boot (the lab writes one per
 * simulated boot). Unreadable, the tick fails and says where: a trial must not be judged without it.
 */
async function readBootId(file: string): Promise<string> {
  try {
    const id = (await readFile(file, "utf8")).trim();
    if (id !== "") return id;
    throw new Error("it is empty");
  } catch (e) {
    throw new AgentError(
      "LIKEN_AGENT_BOOT_ID_UNREADABLE",
      `cannot read this boot's id from ${file} (${errorText(e)}); set bootId in the agent's ` +
        "config to a file that changes at every boot (/proc/sys/kernel/random/boot_id)",
      { cause: e },
    );
  }
}

/** Whether the staged slot's boot files are still to be installed (act.ts installBootFiles). */
function bootFilesDue(bl: Bootloader, other: SlotView, mem: Memory): boolean {
  if (bl.installBootFiles === undefined || other.state !== "staged") return false;
  const done = mem.bootFiles;
  return done?.slot !== other.slot || done.digest !== other.release?.digest;
}

/** What memory says of the trial armed last, and of the last trial without a verdict. */
function trialFacts(mem: Memory): Pick<Observed, "armedTrial" | "noVerdict"> {
  const t = mem.trial;
  return {
    armedTrial: t && { slot: t.slot, bootId: t.bootId, shown: t.shownAt !== undefined },
    ...(mem.noVerdict ? { noVerdict: mem.noVerdict } : {}),
  };
}

/** What people set on this Machine's spec: its reboot policy, an approval, a hold. */
function peopleOf(machine: Machine | undefined): Pick<Observed, "policy" | "approval" | "held"> {
  return {
    policy: machine?.spec.rebootPolicy ?? "Manual",
    approval: machine?.spec.approval,
    ...heldOf(machine),
  };
}

/** The hold a person set on this Machine (spec.hold), as the text its status shows. */
export function heldOf(machine: Machine | undefined): { held?: string } {
  const h = machine?.spec.hold;
  if (h === undefined) return {};
  const why = h.reason === undefined || h.reason === "" ? "" : `: ${h.reason}`;
  return { held: `held by ${h.by} since ${h.at}${why}; liken machine unhold releases it` };
}
