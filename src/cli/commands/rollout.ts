// `liken rollout status CLUSTER` and `liken rollout resume CLUSTER MACHINE --reason ...`:
// what a person needs when a rollout stalls. status shows who holds the turns and why a
// turn is stuck (step, drain blocker with pod and PodDisruptionBudget, heartbeat);
// resume records who released a stalled turn and why, and cluster-operator then takes the
// turn back and grants turns again.
import type { Command } from "commander";
import { isConflict, type Cluster, type Machine } from "../../api/index.js";
import { parseBudget } from "../../operator/budget.js";
import { OperatorError } from "../../operator/errors.js";
import { stallDetail } from "../../operator/progress.js";
import { rfc3339 } from "../../api/time.js";
import { likenApi, loadKubeConfig, whoAmI } from "./people.js";

export function registerRollout(program: Command): void {
  const rollout = program
    .command("rollout")
    .description("examine a rollout and release a stalled reboot turn");

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
    .command("resume")
    .description(
      "release MACHINE's stalled reboot turn after examining it; records who and why, and turns flow again",
    )
    .argument("<cluster>", "the Cluster")
    .argument("<machine>", "the Machine whose turn stalled")
    .requiredOption("--reason <text>", "what you found and did (recorded with your name)")
    .option("--force", "release the turn even though it has not stalled")
    .option("--kubeconfig <file>", "kubeconfig to use (default: $KUBECONFIG or ~/.kube/config)")
    .action(
      async (
        cluster: string,
        machine: string,
        o: { kubeconfig?: string; reason: string; force?: boolean },
      ) => {
        const kc = loadKubeConfig(o.kubeconfig);
        const api = likenApi(kc);
        const by = await whoAmI(kc);
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
          const resume = { turnGrantedAt: turn.grantedAt, by, at, reason: o.reason };
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
            `released the reboot turn of Machine ${machine} (granted ${turn.grantedAt}) as ${by}: ${o.reason}\n` +
              `cluster-operator takes the turn back and grants turns again; until its heartbeat returns, ${machine} counts as Lost against the budget.\n` +
              `Watch with: liken rollout status ${cluster}\n`,
          );
          return;
        }
      },
    );
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
    `Cluster ${c.metadata.name}: ${s.phase ?? "no status yet"}, target ${c.spec.version ?? "none"}, machines ready ${s.machines ?? "?"}`,
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
