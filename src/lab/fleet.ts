// The lab fleet's API objects: the Cluster, one kwok Node and one Machine per simulated
// machine, and the fleet's bootstrap credential, from which each agent gets its own identity
// (a client certificate for liken:machine:<name> in liken:machines, so RBAC and the admission
// policy treat it exactly as a real machine).
import { CoreV1Api, type KubeConfig } from "@kubernetes/client-node";
import { LikenApi } from "../api/client.js";
import { bootstrapTokenSecret, newBootstrapToken } from "../api/bootstrap-token.js";
import {
  API_VERSION,
  agentUserName,
  AGENT_GROUP,
  type Cluster,
  type Machine,
  type RebootPolicy,
  type Role,
} from "../api/types.js";
import { mintClientCert } from "../controlplane/certs.js";
import { kubeconfigYaml } from "../api/kubeconfig-doc.js";
import { addressKwokNode, kwokNode } from "../controlplane/kwok.js";
import type { ControlPlaneState } from "../controlplane/instance.js";
import type { LabRelease } from "./releases.js";
import { writeFileSync } from "node:fs";
import path from "node:path";

export interface LabMachineSpec {
  name: string;
  role: Role;
  rebootPolicy: RebootPolicy;
}

/** Default fleet: three leaders and two workers, a mix of Auto and Manual (issue: the lab). */
export function defaultFleet(count = 5): LabMachineSpec[] {
  const out: LabMachineSpec[] = [];
  for (let i = 1; i <= count; i++) {
    out.push({
      name: `node-${i}`,
      role: i <= Math.min(3, count) ? "Leader" : "Worker",
      // node-1..3 Auto, the rest Manual: a person sees both kinds of turn.
      rebootPolicy: i <= 3 ? "Auto" : "Manual",
    });
  }
  return out;
}

export async function createCluster(
  api: LikenApi,
  name: string,
  source: string,
  current: LabRelease,
): Promise<void> {
  const cluster: Cluster = {
    apiVersion: API_VERSION,
    kind: "Cluster",
    metadata: { name },
    spec: {
      version: current.version,
      releases: { source, catalog: [{ version: current.version, digest: current.digest }] },
      disruption: { maxUnavailable: 1 },
    },
  };
  await api.clusters.create(cluster);
}

export async function createNode(kc: KubeConfig, name: string): Promise<void> {
  const core = kc.makeApiClient(CoreV1Api);
  await core.createNode({
    body: kwokNode(name, {
      labels: { "liken.sh/lab": "true" },
      capacity: { cpu: "8", memory: "32Gi", pods: "110" },
    }),
  });
  await addressKwokNode(kc, name);
}

export async function createMachine(
  api: LikenApi,
  cluster: string,
  m: LabMachineSpec,
): Promise<void> {
  const machine: Machine = {
    apiVersion: API_VERSION,
    kind: "Machine",
    metadata: { name: m.name },
    spec: { cluster, nodeName: m.name, role: m.role, rebootPolicy: m.rebootPolicy },
  };
  await api.machines.create(machine);
}

/**
 * The fleet's shared bootstrap credential, as an image would carry it (docs/machine.md,
 * "Identity"): a bootstrap token valid for two days, in a kubeconfig at `file`. Every machine
 * starts with it alone and joins for a certificate of its own.
 */
export async function bootstrapKubeconfig(
  cp: ControlPlaneState,
  kc: KubeConfig,
  file: string,
): Promise<string> {
  const token = newBootstrapToken();
  const expires = new Date(Date.now() + 2 * 24 * 3600 * 1000);
  await kc.makeApiClient(CoreV1Api).createNamespacedSecret({
    namespace: "kube-system",
    body: bootstrapTokenSecret(token, { expires, description: "the liken lab's machines" }),
  });
  writeFileSync(
    file,
    kubeconfigYaml({
      server: cp.server,
      caFile: cp.certs.caCert,
      user: "bootstrap",
      credentials: { token },
    }),
    { mode: 0o600 },
  );
  return file;
}
/**
 * A kubeconfig for the machine's agent with a certificate minted by the control plane's CA
 * (the manual way of docs/machine.md): for a bench that measures the agent, not its join.
 */
export function agentKubeconfig(cp: ControlPlaneState, dir: string, machine: string): string {
  const { certFile, keyFile } = mintClientCert(cp.certs, dir, agentUserName(machine), [
    AGENT_GROUP,
  ]);
  const file = path.join(dir, "kubeconfig");
  writeFileSync(
    file,
    kubeconfigYaml({
      server: cp.server,
      caFile: cp.certs.caCert,
      user: agentUserName(machine),
      credentials: { certFile, keyFile },
    }),
    { mode: 0o600 },
  );
  return file;
}
