// `liken approve-reboot CLUSTER MACHINE`: a person approves the reboot of a Machine whose
// rebootPolicy is Manual, for exactly the release it staged (an approval for an older
// target never carries over to a newer one). The machine then takes its turn under the
// same budget as an Auto machine.
import type { Command } from "commander";
import { isConflict, type Machine } from "../../api/index.js";
import { OperatorError } from "../../operator/errors.js";
import { rfc3339 } from "../../api/time.js";
import { likenApi, loadKubeConfig, whoAmI } from "./people.js";

export function registerApprove(program: Command): void {
  program
    .command("approve-reboot")
    .description(
      "approve the reboot of MACHINE (rebootPolicy Manual) into the release it staged; it then waits for its turn within the Cluster's budget",
    )
    .argument("<cluster>", "the Cluster")
    .argument("<machine>", "the Machine")
    .option("--kubeconfig <file>", "kubeconfig to use (default: $KUBECONFIG or ~/.kube/config)")
    .action(async (cluster: string, machine: string, o: { kubeconfig?: string }) => {
      const kc = loadKubeConfig(o.kubeconfig);
      const api = likenApi(kc);
      const by = await whoAmI(kc);
      for (let attempt = 1; ; attempt++) {
        const m = await api.machines.find(machine);
        const staged = checkApprovable(cluster, machine, m);
        const at = rfc3339(new Date());
        try {
          await api.machines.patch(
            machine,
            { spec: { approval: { version: staged.version, digest: staged.digest, by, at } } },
            { resourceVersion: m!.metadata.resourceVersion! },
          );
        } catch (e) {
          if (isConflict(e) && attempt < 5) continue; // the agent wrote; read again
          throw e;
        }
        const leader =
          m!.spec.role === "Leader"
            ? " As a leader, it also waits until no other leader is down."
            : "";
        process.stdout.write(
          `approved the reboot of Machine ${machine} into ${staged.version} (${staged.digest}) as ${by} at ${at}.\n` +
            `It takes its reboot turn when Cluster ${cluster}'s disruption budget allows: it drains its node, then boots ${staged.version} once as a trial.${leader}\n` +
            `Watch it with: kubectl get machine ${machine} -w\n`,
        );
        return;
      }
    });
}

function checkApprovable(
  cluster: string,
  machine: string,
  m: Machine | undefined,
): { version: string; digest: string } {
  if (m === undefined) {
    throw new OperatorError(
      "LIKEN_OPERATOR_NOT_FOUND",
      `Machine ${machine} does not exist; list them with kubectl get machines`,
    );
  }
  if (m.spec.cluster !== cluster) {
    throw new OperatorError(
      "LIKEN_OPERATOR_USAGE",
      `Machine ${machine} belongs to Cluster ${m.spec.cluster}, not ${cluster}; nothing approved`,
    );
  }
  const staged = m.status?.staged;
  if (staged === undefined) {
    const step = m.status?.step ?? "no status yet";
    const pct = m.status?.progress ? `, ${m.status.progress.percent}% downloaded` : "";
    throw new OperatorError(
      "LIKEN_OPERATOR_NOT_STAGED",
      `Machine ${machine} has staged no release (step ${step}${pct}); approve it once it reports RebootPending, so the approval names the release it verified`,
    );
  }
  if (m.status?.version === staged.version) {
    throw new OperatorError(
      "LIKEN_OPERATOR_USAGE",
      `Machine ${machine} already runs ${staged.version}; nothing to approve`,
    );
  }
  return { version: staged.version, digest: staged.digest };
}
