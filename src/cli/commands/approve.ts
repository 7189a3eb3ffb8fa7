// `liken approve-reboot CLUSTER MACHINE`: a person approves the reboot of a Machine whose
// rebootPolicy is Manual, for exactly the release it staged (an approval for an older
// target never carries over to a newer one). The machine then takes its turn under the
// same budget as an Auto machine.
import type { Command } from "commander";
import { isConflict, type Machine } from "../../api/index.js";
import { OperatorError } from "../../operator/errors.js";
import { rfc3339 } from "../../api/time.js";
import { LikenError } from "../../errors.js";
import { approvable } from "../views/approval.js";
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
        const staged = await checkApprovable(api, cluster, machine, m);
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

async function checkApprovable(
  api: ReturnType<typeof likenApi>,
  cluster: string,
  machine: string,
  m: Machine | undefined,
): Promise<{ version: string; digest: string }> {
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
  const c = await api.clusters.find(cluster);
  if (c === undefined) {
    throw new OperatorError(
      "LIKEN_OPERATOR_NOT_FOUND",
      `Cluster ${cluster} does not exist; list them with kubectl get clusters`,
    );
  }
  // An approval that can do nothing is refused, with the reason (src/cli/views/approval.ts).
  const a = approvable(c, m);
  if (!a.ok) throw new LikenError(a.code, `nothing approved: ${a.why}`);
  return a.staged;
}
