// `liken check-install`: after `kubectl apply -k` (or helm install), is cluster-operator
// running, and if not, why. The image comes first: a node that cannot pull it says so within
// seconds (ImagePullBackOff), and waiting for the Deployment would only time out.
import { AppsV1Api, CoreV1Api } from "@kubernetes/client-node";
import type { Command } from "commander";
import { setTimeout as sleep } from "node:timers/promises";
import { LikenError } from "../../errors.js";
import { installVerdict, operatorImage } from "../views/install.js";
import { parseDuration } from "./drain.js";
import { loadKubeConfig } from "./people.js";

const SET_IMAGE =
  'push the image (README, "The operator image") and set it: kustomize `images:` in your overlay of config/, or the chart\'s --set image.repository=...';

export function registerCheckInstall(program: Command): void {
  program
    .command("check-install")
    .description(
      "check that cluster-operator runs: its image first (an image the nodes cannot pull is said at once), then its Deployment",
    )
    .option("--kubeconfig <file>", "kubeconfig (default: KUBECONFIG or ~/.kube/config)")
    .option("--namespace <ns>", "the operator's namespace", "liken-system")
    .option("--timeout <duration>", "how long to wait for a ready copy", parseDuration, 120_000)
    .action(async (o: { kubeconfig?: string; namespace: string; timeout: number }) => {
      const kc = loadKubeConfig(o.kubeconfig);
      const apps = kc.makeApiClient(AppsV1Api);
      const core = kc.makeApiClient(CoreV1Api);
      const deployment = await apps
        .readNamespacedDeployment({ name: "cluster-operator", namespace: o.namespace })
        .catch((e: unknown) => {
          throw new LikenError(
            "LIKEN_CLI_INSTALL_NO_OPERATOR",
            `no Deployment ${o.namespace}/cluster-operator (${(e as Error).message.split("\n")[0]}): install it with kubectl apply -k config/ (README, "Install the API")`,
            { cause: e },
          );
        });
      process.stdout.write(`cluster-operator image: ${operatorImage(deployment)}\n`);
      const deadline = Date.now() + o.timeout;
      for (;;) {
        const d = await apps.readNamespacedDeployment({
          name: "cluster-operator",
          namespace: o.namespace,
        });
        const selector = Object.entries(d.spec?.selector.matchLabels ?? {})
          .map(([k, v]) => `${k}=${v}`)
          .join(",");
        const pods = await core.listNamespacedPod({
          namespace: o.namespace,
          labelSelector: selector,
        });
        const v = installVerdict(d, pods.items);
        if (v.kind === "unpullable") {
          throw new LikenError(
            "LIKEN_CLI_IMAGE_UNPULLABLE",
            `the nodes cannot pull the operator image ${v.image} (pod ${v.pod}: ${v.reason}${v.message ? `: ${v.message}` : ""}); ${SET_IMAGE}`,
            { context: { ...v } },
          );
        }
        if (v.kind === "ready") {
          process.stdout.write(`cluster-operator ready: ${v.available} copy(ies) available\n`);
          return;
        }
        if (Date.now() > deadline) {
          throw new LikenError(
            "LIKEN_CLI_INSTALL_NOT_READY",
            `cluster-operator has no ready copy after ${o.timeout / 1000} s (${v.why}); see kubectl -n ${o.namespace} describe deployment cluster-operator`,
          );
        }
        await sleep(2000);
      }
    });
}
