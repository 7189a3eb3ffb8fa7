// `liken rollout status CLUSTER` and `liken rollout resume CLUSTER MACHINE --reason ...`:
// what a person needs when a rollout stalls. status shows who holds the turns and why a
// turn is stuck (step, drain blocker with pod and PodDisruptionBudget, heartbeat);
// resume records who released a stalled turn and why, and cluster-operator then takes the
// turn back and grants turns again. `liken rollout resume CLUSTER --failed-release` lets
// more machines try a release that hit the failure brake (spec.rollout.maxFailedTrials).
import type { Command } from "commander";
import { isConflict, type Cluster, type Machine, type ReleaseRef } from "../../api/index.js";
import { brakeOf, failedList } from "../../operator/turns/brake.js";
import { targetOf } from "../../operator/view/machine-view.js";
import { parseBudget } from "../../operator/turns/budget.js";
import { OperatorError } from "../../operator/errors.js";
import { stallDetail } from "../../operator/turns/progress.js";
import { rfc3339 } from "../../api/time.js";
import { MACHINE_SPEC_BOUNDS, maxLengthOf } from "../../api/bounds.js";
import { likenApi, loadKubeConfig, whoAmI } from "./people.js";
import {
  isFleetSwitch,
  refuseStrayFleetFlags,
  switchContexts,
  withContextOptions,
  type SwitchFlags,
} from "./fleet.js";
import { needsCluster, registerRevert, setPaused } from "./revert.js";

export function registerRollout(program: Command): void {
  const rollout = program
    .command("rollout")
    .description(
      "examine a rollout, release a stalled reboot turn, pause the fleet, revert a release",
    );
  registerRevert(rollout);

  rollout
    .command("status")
    .description("the phase, the budget, who holds a turn and what each is doing, Lost machines")
    .argument("<cluster>", "the Cluster")
    .option("--kubeconfig <file>", "kubeconfig to use (default: $KUBECONFIG or ~/.kube/config)")
    .action(async (cluster: string, o: { kubeconfig?: string }) => {
      const api = likenApi(loadKubeConfig(o.kubeconfig));
      const c = await getCluster(api.clusters.find.bind(api.clusters), cluster);
      const machines = (await api.machines.list({ fieldSelector: `spec.cluster=${cluster}` }))
        .items;
      process.stdout.write(statusText(c, machines));
    });

  rollout
    .command("continue")
    .description(
      "the canary of spec.version looks good: grant turns to the rest of the fleet (CanaryPaused)",
    )
    .argument("<cluster>", "the Cluster")
    .option("--kubeconfig <file>", "kubeconfig to use (default: $KUBECONFIG or ~/.kube/config)")
    .action(async (cluster: string, o: { kubeconfig?: string }) => {
      await continueCanary(cluster, o.kubeconfig);
    });

  withContextOptions(
    rollout
      .command("resume")
      .description(
        "release MACHINE's stalled reboot turn after examining it (records who and why, and turns flow again); with --failed-release and no MACHINE, allow more trials of a release that hit the failure brake; with no MACHINE, end `liken rollout pause` (of many contexts at once with --contexts)",
      )
      .argument("[cluster]", "the Cluster (with --contexts: only this Cluster in each context)")
      .argument("[machine]", "the Machine whose turn stalled")
      .option("--reason <text>", "what you found and did (recorded with your name)")
      .option("--force", "release the turn even though it has not stalled")
      .option(
        "--failed-release",
        "accept the failed trials of spec.version so far; more machines may try it (ReleaseFailed)",
      ),
    "end the pause in these kubeconfig contexts at once, comma-separated; says which it reached",
  )
    .option("--all-contexts", "end the pause in every context of the kubeconfig")
    .action(
      async (
        cluster: string | undefined,
        machine: string | undefined,
        o: SwitchFlags & { reason?: string; force?: boolean; failedRelease?: boolean },
      ) => {
        if (isFleetSwitch(o)) {
          if (
            machine !== undefined ||
            o.reason !== undefined ||
            o.force === true ||
            o.failedRelease === true
          )
            throw usage(
              '--contexts ends pauses only; release a stalled turn or a failed release in one Cluster at a time: liken rollout resume CLUSTER MACHINE --reason "..."',
            );
          await switchContexts(cluster, false, o);
          return;
        }
        refuseStrayFleetFlags(o, "resume");
        if (cluster === undefined) throw needsCluster("resume");
        if (o.failedRelease === true) {
          if (machine !== undefined)
            throw usage(
              `--failed-release takes no machine (got ${machine}): it applies to the Cluster's spec.version`,
            );
          await resumeFailedRelease(cluster, o.kubeconfig);
          return;
        }
        if (machine === undefined && o.reason === undefined && o.force !== true) {
          // No machine: the end of `liken rollout pause` (revert.ts refuses when not paused).
          await setPaused(cluster, false, o.kubeconfig);
          return;
        }
        if (machine === undefined || o.reason === undefined) {
          throw usage(
            `name the Machine whose turn stalled and say why: liken rollout resume ${cluster} <machine> --reason "..." (or --failed-release for a ReleaseFailed rollout)`,
          );
        }
        await resumeTurn(cluster, machine, o.reason, o);
      },
    );
}

/** Refuses a value the Machine's spec.<path> cannot hold, before anything is written. */
function withinBound(what: string, value: string, path: string, fix: string): void {
  const max = maxLengthOf(MACHINE_SPEC_BOUNDS, path);
  if (value.length <= max) return;
  throw new OperatorError(
    "LIKEN_OPERATOR_USAGE",
    `${what} has ${value.length} characters; Machine spec.${path} holds at most ${max}: ${fix}. Nothing was written`,
  );
}

/** Releases a stalled turn: Machine spec.resume, conditioned on the Machine's resourceVersion. */
async function resumeTurn(
  cluster: string,
  machine: string,
  reason: string,
  o: { kubeconfig?: string; force?: boolean },
): Promise<void> {
  const kc = loadKubeConfig(o.kubeconfig);
  const api = likenApi(kc);
  const by = await whoAmI(kc);
  withinBound(
    "--reason",
    reason,
    "resume.reason",
    "say it shorter; the details belong in your ticket",
  );
  withinBound("your Kubernetes user name", by, "resume.by", "run it as a user with a shorter name");
  for (let attempt = 1; ; attempt++) {
    const c = await getCluster(api.clusters.find.bind(api.clusters), cluster);
    const turn = c.status?.rebootTurns?.find((t) => t.machine === machine);
    if (turn === undefined) {
      throw new OperatorError(
        "LIKEN_OPERATOR_NO_TURN",
        `Machine ${machine} holds no reboot turn in Cluster ${cluster} (turns: ${c.status?.turns || "none"}); nothing to resume`,
      );
    }
    if (turn.stalledAt === undefined && o.force !== true) {
      throw new OperatorError(
        "LIKEN_OPERATOR_USAGE",
        `the turn of Machine ${machine} (granted ${turn.grantedAt}, deadline ${turn.deadline ?? "none"}) has not stalled; it may still be draining or rebooting. Use --force to release it anyway`,
      );
    }
    const m = await api.machines.find(machine);
    const at = rfc3339(new Date());
    const resume = { turnGrantedAt: turn.grantedAt, by, at, reason };
    try {
      if (m === undefined) throw notFound(machine);
      await api.machines.patch(
        machine,
        { spec: { resume } },
        { resourceVersion: m.metadata.resourceVersion! },
      );
    } catch (e) {
      if (isConflict(e) && attempt < 5) continue;
      throw e;
    }
    process.stdout.write(
      `released the reboot turn of Machine ${machine} (granted ${turn.grantedAt}) as ${by}: ${reason}\n` +
        `cluster-operator takes the turn back and grants turns again; until its heartbeat returns, ${machine} counts as Lost against the budget.\n` +
        `Watch with: liken rollout status ${cluster}\n`,
    );
    return;
  }
}

/**
 * Records in spec.rollout.canaryContinue that the canary of exactly the current target
 * passed; the write is conditioned on the Cluster's resourceVersion, so it continues the
 * release it printed and no later one.
 */
async function continueCanary(cluster: string, kubeconfig: string | undefined): Promise<void> {
  const kc = loadKubeConfig(kubeconfig);
  const api = likenApi(kc);
  const by = await whoAmI(kc);
  for (let attempt = 1; ; attempt++) {
    const c = await getCluster(api.clusters.find.bind(api.clusters), cluster);
    const { target, canary } = canaryToContinue(c);
    const canaryContinue = { ...target, by, at: rfc3339(new Date()) };
    try {
      await api.clusters.patch(
        cluster,
        { spec: { rollout: { canaryContinue } } },
        { resourceVersion: c.metadata.resourceVersion! },
      );
    } catch (e) {
      if (isConflict(e) && attempt < 5) continue;
      throw e;
    }
    const who = canary.length > 0 ? ` (canary: ${canary.join(", ")})` : "";
    process.stdout.write(
      `continued the rollout of ${target.version} in Cluster ${cluster} as ${by}${who}\n` +
        `cluster-operator grants turns to the rest of the fleet within the budget.\n` +
        `Watch with: liken rollout status ${cluster}\n`,
    );
    return;
  }
}

/** The target whose canary may be continued, and its canary machines; refuses otherwise. */
function canaryToContinue(c: Cluster): { target: ReleaseRef; canary: string[] } {
  const cluster = c.metadata.name;
  const target = targetOf(c);
  if (target === undefined || c.spec.rollout?.canary === undefined) {
    throw usage(
      `Cluster ${cluster} has no canary to continue (spec.rollout.canary is ${c.spec.rollout?.canary === undefined ? "not set" : "set"}, spec.version ${c.spec.version ?? "unset"})`,
    );
  }
  const status = c.status?.canary;
  const current = status?.version === target.version && status.digest === target.digest;
  if (!current) return { target, canary: [] };
  if (status.passedAt !== undefined) {
    throw usage(
      `the canary of ${target.version} in Cluster ${cluster} already passed at ${status.passedAt}; turns go to the rest of the fleet`,
    );
  }
  return { target, canary: status.machines };
}

function usage(message: string): OperatorError {
  return new OperatorError("LIKEN_OPERATOR_USAGE", message);
}

/**
 * Records in spec.rollout.failedReleaseResume which failed trials of the target a person
 * accepted; the brake then counts only later failures. The write is conditioned on the
 * Cluster's resourceVersion, so it accepts exactly the failures it printed.
 */
async function resumeFailedRelease(cluster: string, kubeconfig: string | undefined): Promise<void> {
  const kc = loadKubeConfig(kubeconfig);
  const api = likenApi(kc);
  const by = await whoAmI(kc);
  for (let attempt = 1; ; attempt++) {
    const c = await getCluster(api.clusters.find.bind(api.clusters), cluster);
    const target = targetOf(c);
    const machines = (await api.machines.list({ fieldSelector: `spec.cluster=${cluster}` })).items;
    const brake = brakeOf(c, machines, target);
    if (target === undefined || !brake.held) {
      throw usage(
        `Cluster ${cluster} is not held by failed trials of ${target?.version ?? "its spec.version (unset)"} (${brake.counted.length} counted, spec.rollout.maxFailedTrials ${brake.limit}); nothing to resume`,
      );
    }
    const resume = {
      version: target.version,
      digest: target.digest,
      machines: brake.failed.map((f) => f.machine),
      by,
      at: rfc3339(new Date()),
    };
    try {
      await api.clusters.patch(
        cluster,
        { spec: { rollout: { failedReleaseResume: resume } } },
        { resourceVersion: c.metadata.resourceVersion! },
      );
    } catch (e) {
      if (isConflict(e) && attempt < 5) continue;
      throw e;
    }
    process.stdout.write(
      `accepted the failed trials of ${target.version} as ${by}: ${failedList(brake.failed)}\n` +
        `cluster-operator grants turns for ${target.version} again until ${brake.limit} more machine(s) fail it (spec.rollout.maxFailedTrials).\n` +
        `Watch with: liken rollout status ${cluster}\n`,
    );
    return;
  }
}

function notFound(machine: string): OperatorError {
  return new OperatorError(
    "LIKEN_OPERATOR_NOT_FOUND",
    `Machine ${machine} does not exist; cluster-operator takes the turn of a deleted Machine back by itself`,
  );
}

async function getCluster(
  find: (name: string) => Promise<Cluster | undefined>,
  name: string,
): Promise<Cluster> {
  const c = await find(name);
  if (c === undefined) {
    throw new OperatorError(
      "LIKEN_OPERATOR_NOT_FOUND",
      `Cluster ${name} does not exist; list them with kubectl get clusters`,
    );
  }
  return c;
}

export function statusText(c: Cluster, machines: readonly Machine[]): string {
  return [...headLines(c, machines), ...turnLines(c, machines), ...machineLines(machines)]
    .map((l) => `${l}\n`)
    .join("");
}

function headLines(c: Cluster, machines: readonly Machine[]): string[] {
  const s = c.status ?? {};
  const budget = parseBudget(c.spec.disruption?.maxUnavailable, machines.length);
  const lines = [
    `Cluster ${c.metadata.name}: ${s.display ?? s.phase ?? "no status yet"}, target ${c.spec.version ?? "none"}, machines ready ${s.machines ?? "?"}`,
    `budget: ${budget.text}; down now: ${s.counts?.unavailable ?? "?"} (Lost ${s.counts?.lost ?? "?"})`,
  ];
  const p = s.conditions?.find((x) => x.type === "Progressing");
  if (p !== undefined) {
    lines.push(`Progressing=${p.status} ${p.reason} since ${p.lastTransitionTime}: ${p.message}`);
  }
  return lines;
}

function turnLines(c: Cluster, machines: readonly Machine[]): string[] {
  const turns = c.status?.rebootTurns ?? [];
  const lines = [turns.length === 0 ? "turns: none" : "turns:"];
  for (const t of turns) {
    const m = machines.find((x) => x.metadata.name === t.machine);
    const state = t.stalledAt ? `STALLED at ${t.stalledAt}` : `deadline ${t.deadline ?? "none"}`;
    const leader = t.leader ? " (leader)" : "";
    lines.push(
      `  ${t.machine}${leader}: ${t.version}, granted ${t.grantedAt} by ${t.grantedBy}, ${state}`,
    );
    lines.push(`    ${stallDetail(t, m, m?.status?.step === "Lost")}`);
  }
  return lines;
}

function machineLines(machines: readonly Machine[]): string[] {
  const named = (step: string): string[] =>
    machines.filter((m) => m.status?.step === step).map((m) => m.metadata.name);
  const lines: string[] = [];
  const lost = named("Lost");
  if (lost.length > 0) lines.push(`Lost (no heartbeat): ${lost.join(", ")}`);
  const waiting = named("RebootPending");
  if (waiting.length > 0) lines.push(`waiting for approve-reboot: ${waiting.join(", ")}`);
  return lines;
}
