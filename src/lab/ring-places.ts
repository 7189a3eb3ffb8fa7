// Where the later rings of the rings scene run: the early ring on a control plane of its own,
// with its own cluster-operator, and the stable ring beside the lab's Cluster on the lab's
// control plane; each with its Cluster and machine made, on the factory release, and joined.
// They come up while canary works, since the early ring's control plane takes the longest.
import { copyFileSync } from "node:fs";
import path from "node:path";
import type { KubeConfig } from "@kubernetes/client-node";
import { LikenApi } from "../api/client.js";
import { loadKubeConfig } from "../api/kubeconfig.js";
import { down, up, type ControlPlaneState } from "../controlplane/instance.js";
import { EVICTION_PATH } from "../operator/webhook/names.js";
import {
  bootstrapKubeconfig,
  createCluster,
  createMachine,
  createNode,
  type LabMachineSpec,
} from "./fleet.js";
import { installApi, LAB_SIGNING_DURATION_SECONDS, type Lab } from "./lab.js";
import { LAB_DIR, LAB_RING_KUBECONFIG, LAB_RING_PLANE } from "./paths.js";
import {
  type FleetOperatorOptions,
  operatorKubeconfig,
  powerOn,
  prepareMachines,
  startOperator,
  waitForReports,
} from "./processes.js";
import type { LabRelease } from "./releases.js";
import { RING_CLUSTERS } from "./ring.js";
import { startWebhookService } from "./webhook-service.js";

/** A control plane of its own for the early ring, with liken's API installed. */
async function secondPlane(lab: Lab): Promise<ControlPlaneState> {
  const cp = await up({
    name: LAB_RING_PLANE,
    signingDurationSeconds: LAB_SIGNING_DURATION_SECONDS,
  });
  lab.stoppers.push(async () => void (await down(LAB_RING_PLANE)));
  copyFileSync(cp.kubeconfig, LAB_RING_KUBECONFIG);
  await installApi(lab.binDir, cp.kubeconfig);
  return cp;
}

/** The Node and the Machine of each spec, for `cluster`. */
async function objects(kc: KubeConfig, api: LikenApi, cluster: string, specs: LabMachineSpec[]) {
  for (const m of specs) {
    await createNode(kc, m.name);
    await createMachine(api, cluster, m);
  }
}

const worker = (name: string): LabMachineSpec => ({
  name,
  role: "Worker",
  rebootPolicy: "Auto",
});

/**
 * The early ring on a control plane of its own (its Cluster, its machine, its own
 * cluster-operator) and the stable ring's Cluster and machine beside the lab's: everything
 * on the factory release, machines joined.
 */
export async function placeRings(
  lab: Lab,
  first: LabRelease,
  operatorOptions: FleetOperatorOptions,
): Promise<{ cp2: ControlPlaneState; api2: LikenApi }> {
  const work = path.join(LAB_DIR, "lab");
  const cp2 = await secondPlane(lab);
  const kc2 = loadKubeConfig(cp2.kubeconfig);
  const api2 = new LikenApi(kc2, "liken-lab");
  const earlyMachines = [worker("early-1")];
  const stableMachines = [worker("stable-1")];
  await createCluster(api2, RING_CLUSTERS.early, lab.channel.url, first);
  await objects(kc2, api2, RING_CLUSTERS.early, earlyMachines);
  await createCluster(lab.api, RING_CLUSTERS.stable, lab.channel.url, first);
  await objects(lab.kubeConfig, lab.api, RING_CLUSTERS.stable, stableMachines);
  const early = await prepareMachines(
    {
      controlPlane: cp2,
      cluster: RING_CLUSTERS.early,
      bootstrap: await bootstrapKubeconfig(cp2, kc2, path.join(work, "bootstrap-early.kubeconfig")),
    },
    earlyMachines,
    lab.channel.url,
    first,
  );
  const stable = await prepareMachines(
    {
      controlPlane: lab.controlPlane,
      cluster: RING_CLUSTERS.stable,
      bootstrap: path.join(work, "bootstrap.kubeconfig"),
    },
    stableMachines,
    lab.channel.url,
    first,
  );
  // The early ring's own cluster-operator (one copy), then its machine; stable's machine is
  // served by the lab's operators, which reconcile every Cluster on their control plane. The
  // early operator grants no turn for its start grace (40 s, or the lab's --start-grace): the
  // scene starts it first.
  const service = await startWebhookService(1);
  lab.stoppers.push(() => service.close());
  startOperator(
    lab,
    await operatorKubeconfig(
      { binDir: lab.binDir, controlPlane: cp2 },
      path.join(work, "operator-early.kubeconfig"),
    ),
    "operator-early",
    { port: service.backends[0]!, url: `https://127.0.0.1:${service.port}${EVICTION_PATH}` },
    {
      logFile: path.join(work, "operator-early.log"),
      ...(operatorOptions.startGraceSeconds === undefined
        ? {}
        : { startGraceSeconds: operatorOptions.startGraceSeconds }),
    },
  );
  powerOn(lab, [...early, ...stable]);
  await waitForReports(api2, ["early-1"], first.version);
  await waitForReports(lab.api, ["stable-1"], first.version);
  return { cp2, api2 };
}
