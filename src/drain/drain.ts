// The drain of one node, as a list of named phases: cordon, plan, evict wave by wave, done.
// Decisions come from plan.ts (pure); this file only looks, acts, waits and reports.
//
// Must never: delete a pod (evictions only, so budgets apply); evict a driver pod while a
// claim it serves lists a consumer on this node; return "finished" while a planned pod is
// still on the node; uncordon on failure (the node stays cordoned, the error says why). A
// stop (`stop`: the caller no longer needs the node drained, its target changed) is not a
// failure: the drain stops evicting, undoes liken's cordon, and says so.
import type { KubeConfig, V1Node, V1Pod } from "@kubernetes/client-node";
import { setTimeout as sleep } from "node:timers/promises";
import { cordonAction, type CordonAction } from "./cordon.js";
import { exclusion } from "./lb-exclusion.js";
import type { DriverPodSelectors } from "./drivers.js";
import { errorText } from "../errors.js";
import { DrainError } from "./errors.js";
import { DrainApi, type EvictionOutcome } from "./kube.js";
import { uncordonWith } from "./uncordon.js";
import { budgetsFor } from "./pdb.js";
import {
  admitNewcomers,
  nextStep,
  planDrain,
  type DrainPlan,
  type DriverFinding,
  type LeftPod,
  type PlannedPod,
  type Snapshot,
  type Wait,
  type WaveName,
} from "./plan.js";
import { uidOf } from "./pods.js";
import { evictionRetryDelay, POLL_INTERVAL_MS } from "./retry.js";

export interface DrainOptions {
  /** The whole drain, cordon to last pod gone. At the deadline the node stays cordoned. */
  timeoutMs: number;
  /** Driver name -> the pods that run it (agent config). See drivers.ts for the rule. */
  driverPods?: DriverPodSelectors;
  /** Told every step: the agent puts blockers into the Machine status, the CLI prints them. */
  onProgress?: (p: DrainProgress) => void;
  signal?: AbortSignal;
  /**
   * Aborted when the drain is no longer wanted (the agent's target changed during it): no
   * further eviction, liken's cordon undone, a `DrainStopped` Event, then LIKEN_DRAIN_STOPPED
   * with the abort reason's text. Unlike `signal`, which leaves the node cordoned.
   */
  stop?: AbortSignal;
  /**
   * Take the node out of the external load balancers with the cordon and wait this long before
   * the first eviction (lb-exclusion.ts). Absent or 0: no label, no wait.
   */
  loadBalancerDelayMs?: number;
  /** Between two looks at the node (tests shorten it). */
  pollIntervalMs?: number;
  /** Record Events on the Node (default true). */
  events?: boolean;
}

/** A pod whose eviction the API server refuses, and the budgets that match it. */
export interface Blocker {
  pod: string;
  /** "budget": a PodDisruptionBudget; "admission": an admission webhook that fails closed. */
  by: "budget" | "admission";
  pdbs: string[];
  message: string;
  attempts: number;
  /** When the eviction was first refused (ISO 8601), for the Machine's status.drainBlocker. */
  since: string;
}

export type DrainProgress =
  | { kind: "cordoned"; node: string; how: CordonAction["kind"] }
  /** Labelled out of the external load balancers; the first eviction waits `waitMs`. */
  | { kind: "excluded"; node: string; waitMs: number }
  | { kind: "planned"; plan: DrainPlan }
  | { kind: "driver-unidentified"; driver: string; claims: string[]; keptUntilLast: string[] }
  | { kind: "evicting"; pod: string; wave: WaveName }
  | { kind: "blocked"; blocker: Blocker }
  | { kind: "waiting"; wave: WaveName; waiting: Wait[] }
  | { kind: "warning"; message: string }
  | { kind: "finished"; result: DrainResult };

export interface DrainResult {
  node: string;
  /** "cordon": liken cordoned it now; "already-ours": an earlier liken drain did. */
  cordon: CordonAction["kind"];
  /** In the order the API server accepted the evictions. */
  evicted: string[];
  left: LeftPod[];
  drivers: DriverFinding[];
  unidentifiedDrivers: string[];
  durationMs: number;
}

export async function drainNode(
  kc: KubeConfig,
  node: string,
  opts: DrainOptions,
): Promise<DrainResult> {
  return new DrainRun(new DrainApi(kc), node, opts).run();
}

/**
 * An unchanged wait is told again this often: a caller that feeds a watchdog from the
 * progress callback (the agent feeds systemd's) hears from a drain that waits, for example
 * on a pod with a long termination grace period, well within a 30 s WatchdogSec.
 */
const WAITING_REPEAT_MS = 10_000;

/** Attempts to cordon before giving up on conflicting writes to the Node. */
const CORDON_ATTEMPTS = 5;

class DrainRun {
  private readonly started = Date.now();
  private readonly deadline: number;
  private readonly evicted: string[] = [];
  private readonly blockers = new Map<string, Blocker>();
  private readonly retryAt = new Map<string, number>();
  private readonly eventsSent = new Set<string>();
  private lastWaiting = "";
  private lastWaitingAt = 0;
  private nodeObj: V1Node | undefined;

  constructor(
    private readonly api: DrainApi,
    private readonly node: string,
    private readonly opts: DrainOptions,
  ) {
    this.deadline = this.started + opts.timeoutMs;
  }

  private report(p: DrainProgress): void {
    this.opts.onProgress?.(p);
  }

  async run(): Promise<DrainResult> {
    const cordon = await this.cordon();
    if (cordon !== "someone-elses") await this.excludeFromLoadBalancers();
    let plan = planDrain(this.node, await this.observe(), this.opts.driverPods ?? {});
    this.report({ kind: "planned", plan });
    const unidentified = plan.drivers.filter((d) => d.by === "unidentified");
    for (const d of unidentified) await this.reportUnidentified(d, plan);

    for (;;) {
      await this.checkAbort();
      const snap = await this.observeOrWait();
      if (snap === undefined) continue;
      plan = this.admit(plan, snap);
      const step = nextStep(plan, snap);
      if (step.kind === "done") break;
      this.reportWaiting(step.wave, step.waiting);
      if (Date.now() >= this.deadline) await this.failDeadline(plan, snap, step.waiting);
      await Promise.all(step.evict.map((p) => this.evictOne(p, snap)));
      await this.pause();
    }

    const result: DrainResult = {
      node: this.node,
      cordon,
      evicted: this.evicted,
      left: plan.left,
      drivers: plan.drivers,
      unidentifiedDrivers: unidentified.map((d) => d.driver),
      durationMs: Date.now() - this.started,
    };
    this.report({ kind: "finished", result });
    return result;
  }

  private admit(plan: DrainPlan, snap: Snapshot): DrainPlan {
    const next = admitNewcomers(plan, snap, this.opts.driverPods ?? {});
    if (next === plan) return plan;
    const before = new Set(plan.waves.flatMap((w) => w.pods.map((p) => p.uid)));
    for (const w of next.waves) {
      for (const p of w.pods) {
        if (!before.has(p.uid)) {
          this.report({
            kind: "warning",
            message: `${p.pod} arrived after the cordon; it leaves with ${w.name}`,
          });
        }
      }
    }
    return next;
  }

  private async cordon(): Promise<CordonAction["kind"]> {
    for (let attempt = 1; attempt <= CORDON_ATTEMPTS; attempt++) {
      const node = await this.api.getNode(this.node);
      if (node === undefined) {
        throw new DrainError("LIKEN_DRAIN_NODE_NOT_FOUND", `node ${this.node} does not exist`, {
          context: { node: this.node },
        });
      }
      const action = cordonAction(node);
      if (action.kind !== "cordon") {
        this.nodeObj = node;
        this.report({ kind: "cordoned", node: this.node, how: action.kind });
        return action.kind;
      }
      const patched = await this.api.patchNode(this.node, action.patch);
      if (patched !== "conflict") {
        this.nodeObj = patched;
        this.report({ kind: "cordoned", node: this.node, how: "cordon" });
        return "cordon";
      }
    }
    throw new DrainError(
      "LIKEN_DRAIN_API",
      `node ${this.node}: the Node changed under every one of ${CORDON_ATTEMPTS} cordon attempts; try again`,
      { retryable: true, context: { node: this.node } },
    );
  }

  /**
   * With liken's cordon: the exclusion label, then the wait that lets connections drain. A run
   * that finds the label already there (set by an earlier run, or by a person) does not wait
   * again. The wait ends early on an abort, as every wait of the drain does.
   */
  private async excludeFromLoadBalancers(): Promise<void> {
    const waitMs = this.opts.loadBalancerDelayMs ?? 0;
    if (waitMs <= 0) return;
    for (let attempt = 1; attempt <= CORDON_ATTEMPTS; attempt++) {
      const node = this.nodeObj ?? (await this.api.getNode(this.node));
      const add = node === undefined ? undefined : exclusion(node);
      if (add === undefined) return;
      const rv = node?.metadata?.resourceVersion ?? "";
      const patched = await this.api.patchNode(this.node, {
        metadata: { resourceVersion: rv, ...add },
      });
      if (patched !== "conflict") {
        this.nodeObj = patched;
        this.report({ kind: "excluded", node: this.node, waitMs });
        const until = Date.now() + waitMs;
        while (Date.now() < until) {
          await this.checkAbort();
          await sleep(Math.min(until - Date.now(), this.opts.pollIntervalMs ?? POLL_INTERVAL_MS));
        }
        return;
      }
      this.nodeObj = undefined; // changed under us: read it again
    }
    throw new DrainError(
      "LIKEN_DRAIN_API",
      `node ${this.node}: the Node changed under every one of ${CORDON_ATTEMPTS} attempts to take it out of the load balancers; try again`,
      { retryable: true, context: { node: this.node } },
    );
  }

  private async observe(): Promise<Snapshot> {
    const [pods, claims] = await Promise.all([this.api.podsOnNode(this.node), this.api.claims()]);
    return { pods, claims };
  }

  /**
   * A look that fails for a passing reason (the API server restarting, a timeout) is
   * reported and tried again after a pause, up to the deadline; any other failure ends the
   * drain with the node cordoned.
   */
  private async observeOrWait(): Promise<Snapshot | undefined> {
    try {
      return await this.observe();
    } catch (e) {
      if (!(e instanceof DrainError) || !e.retryable) throw e;
      if (Date.now() >= this.deadline) {
        throw new DrainError(
          "LIKEN_DRAIN_DEADLINE",
          `node ${this.node}: the drain did not finish within ${Math.round(this.opts.timeoutMs / 1000)} s: ${e.message}. The node stays cordoned.`,
          { retryable: true, context: { node: this.node, blockers: [], waiting: [] }, cause: e },
        );
      }
      this.report({ kind: "warning", message: `${e.message}; looking again` });
      await this.pause();
      return undefined;
    }
  }

  private async evictOne(planned: PlannedPod, snap: Snapshot): Promise<void> {
    if ((this.retryAt.get(planned.uid) ?? 0) > Date.now()) return;
    const pod = snap.pods.find((p) => uidOf(p) === planned.uid);
    if (pod === undefined) return;
    const [namespace, name] = [pod.metadata?.namespace ?? "", pod.metadata?.name ?? ""];
    const outcome = await this.api.evict(namespace, name, planned.uid);
    await this.handle(outcome, planned, pod);
  }

  private async handle(outcome: EvictionOutcome, planned: PlannedPod, pod: V1Pod): Promise<void> {
    switch (outcome.kind) {
      case "accepted":
        this.evicted.push(planned.pod);
        this.blockers.delete(planned.uid);
        this.report({ kind: "evicting", pod: planned.pod, wave: planned.wave });
        return;
      case "gone":
        this.blockers.delete(planned.uid);
        return;
      case "blocked":
        return this.blocked(planned, pod, outcome.by, outcome.message);
      case "conflict":
        // The next look shows whether the pod is gone or replaced (its UID no longer on the
        // node) or still there to evict again.
        this.report({ kind: "warning", message: `evicting ${planned.pod}: ${outcome.message}` });
        return;
      case "failed":
        if (!outcome.retryable) {
          throw new DrainError(
            "LIKEN_DRAIN_EVICTION_REFUSED",
            `node ${this.node}: the API server refused to evict ${planned.pod} (${outcome.status}: ${outcome.message}); the node stays cordoned`,
            { context: { node: this.node, pod: planned.pod, status: outcome.status } },
          );
        }
        this.backOff(planned.uid);
        this.report({ kind: "warning", message: `evicting ${planned.pod}: ${outcome.message}` });
        return;
      default: {
        const never: never = outcome;
        throw new Error(`unhandled eviction outcome ${JSON.stringify(never)}`);
      }
    }
  }

  private async blocked(
    planned: PlannedPod,
    pod: V1Pod,
    by: Blocker["by"],
    message: string,
  ): Promise<void> {
    const pdbs = by === "budget" ? await this.budgetsOf(pod) : [];
    const previous = this.blockers.get(planned.uid);
    const blocker: Blocker = {
      pod: planned.pod,
      by,
      pdbs,
      message:
        by === "budget"
          ? message
          : `the admission check of this eviction could not decide (it did not answer, or could not read what it needs), so the API server refuses the eviction until it can (for liken's eviction check: is a cluster-operator copy serving it?): ${message}`,
      attempts: (previous?.attempts ?? 0) + 1,
      since: previous?.since ?? new Date().toISOString(),
    };
    this.blockers.set(planned.uid, blocker);
    this.backOff(planned.uid);
    this.report({ kind: "blocked", blocker });
    const key = `${blocker.pod}|${pdbs.join(",")}`;
    if (this.eventsSent.has(key)) return;
    this.eventsSent.add(key);
    await this.event("Warning", "DrainBlocked", blockerText(blocker));
  }

  /** The budgets that match the pod; a failed lookup is reported and names none. */
  private async budgetsOf(pod: V1Pod): Promise<string[]> {
    try {
      return budgetsFor(pod, await this.api.budgets(pod.metadata?.namespace ?? ""));
    } catch (e) {
      this.report({ kind: "warning", message: errorText(e) });
      return [];
    }
  }

  private backOff(uid: string): void {
    const attempts = this.blockers.get(uid)?.attempts ?? 1;
    this.retryAt.set(uid, Date.now() + evictionRetryDelay(attempts));
  }

  private async reportUnidentified(d: DriverFinding, plan: DrainPlan): Promise<void> {
    const keptUntilLast = plan.waves
      .filter((w) => w.name === "driver-candidates")
      .flatMap((w) => w.pods.map((p) => p.pod));
    this.report({ kind: "driver-unidentified", driver: d.driver, claims: d.claims, keptUntilLast });
    const who =
      keptUntilLast.length > 0
        ? `the pods that may run it leave last: ${keptUntilLast.join(", ")}`
        : "no pod on the node looks like it";
    await this.event(
      "Warning",
      "DrainDriverUnidentified",
      `DRA driver ${d.driver} serves ${d.claims.join(", ")} but no pod on this node could be identified as it; ${who}. Name its pods in the agent config (drain.driverPods).`,
    );
  }

  private reportWaiting(wave: WaveName, waiting: Wait[]): void {
    const key = JSON.stringify([wave, waiting]);
    if (key === this.lastWaiting && Date.now() - this.lastWaitingAt < WAITING_REPEAT_MS) return;
    this.lastWaiting = key;
    this.lastWaitingAt = Date.now();
    if (waiting.length > 0) this.report({ kind: "waiting", wave, waiting });
  }

  private async failDeadline(plan: DrainPlan, snap: Snapshot, waiting: Wait[]): Promise<never> {
    const present = new Set(snap.pods.map(uidOf));
    const remaining = plan.waves.flatMap((w) => w.pods).filter((p) => present.has(p.uid));
    const blockers = remaining.flatMap((p) => this.blockers.get(p.uid) ?? []);
    const why = blockers.map(blockerText).concat(waiting.map(waitText));
    const message =
      `node ${this.node}: the drain did not finish within ${Math.round(this.opts.timeoutMs / 1000)} s; ` +
      `${remaining.length} pod(s) still on it (${remaining.map((p) => p.pod).join(", ")}). ` +
      `${why.join("; ") || "they did not leave in time"}. ` +
      `The node stays cordoned; resolve the blocker and drain again, or uncordon it with \`liken uncordon ${this.node}\`.`;
    await this.event("Warning", "DrainDeadline", message);
    throw new DrainError("LIKEN_DRAIN_DEADLINE", message, {
      retryable: true,
      context: { node: this.node, blockers, waiting, remaining: remaining.map((p) => p.pod) },
    });
  }

  private async checkAbort(): Promise<void> {
    if (this.opts.stop?.aborted === true && this.opts.signal?.aborted !== true) {
      await this.stopped();
    }
    if (this.opts.signal?.aborted !== true) return;
    throw new DrainError(
      "LIKEN_DRAIN_ABORTED",
      `node ${this.node}: drain aborted; the node stays cordoned`,
      { context: { node: this.node }, cause: this.opts.signal.reason },
    );
  }

  /** The drain is no longer wanted: undo liken's cordon, say so, end with LIKEN_DRAIN_STOPPED. */
  private async stopped(): Promise<never> {
    const why = reasonText(this.opts.stop?.reason);
    const uncordoned = (await uncordonWith(this.api, this.node)) === "uncordoned";
    const message =
      `node ${this.node}: drain stopped before it finished: ${why}. ` +
      `${this.evicted.length} pod(s) were evicted, no further eviction is made; ` +
      (uncordoned
        ? "liken's cordon is undone and the node takes pods again."
        : "the node carries no cordon of liken's to undo.");
    this.report({ kind: "warning", message });
    await this.event("Normal", "DrainStopped", message);
    throw new DrainError("LIKEN_DRAIN_STOPPED", message, {
      context: { node: this.node, evicted: this.evicted },
      cause: this.opts.stop?.reason,
    });
  }

  private async pause(): Promise<void> {
    const ms = Math.max(
      0,
      Math.min(this.opts.pollIntervalMs ?? POLL_INTERVAL_MS, this.deadline - Date.now()),
    );
    const signals = [this.opts.signal, this.opts.stop].filter((x) => x !== undefined);
    try {
      await sleep(ms, undefined, { signal: AbortSignal.any(signals) });
    } catch {
      await this.checkAbort();
    }
  }

  /** Events are for people; a failed one is reported, never the reason a drain fails. */
  private async event(type: "Normal" | "Warning", reason: string, message: string) {
    if (this.opts.events === false || this.nodeObj === undefined) return;
    try {
      await this.api.nodeEvent(this.nodeObj, type, reason, message);
    } catch (e) {
      this.report({ kind: "warning", message: errorText(e) });
    }
  }
}

function reasonText(reason: unknown): string {
  if (reason instanceof Error) return reason.message;
  return typeof reason === "string" ? reason : "the caller stopped it";
}

export function blockerText(b: Blocker): string {
  if (b.by === "admission") return `pod ${b.pod}: ${b.message}`;
  const by =
    b.pdbs.length === 0
      ? "no PodDisruptionBudget that liken can see"
      : `PodDisruptionBudget ${b.pdbs.join(" and ")}`;
  return `pod ${b.pod} is held by ${by}: ${b.message}`;
}

export function waitText(w: Wait): string {
  switch (w.why) {
    case "terminating":
      return `pod ${w.pod} is terminating`;
    case "claims-reserved":
      return `driver pod ${w.pod} waits for ${w.claims
        .map((c) => `ResourceClaim ${c.claim} (reserved for ${c.consumers.join(", ")})`)
        .join(", ")}`;
    default: {
      const never: never = w;
      return String(never);
    }
  }
}
