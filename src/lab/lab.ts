// The lab: a local control plane, liken's API, a release channel with releases built on the
// spot, cluster-operator, and a fleet of simulated machines each running the real agent.
// Everything it starts it records, and `stop()` ends it all (Ctrl-C in the foreground).
import { execFile } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, rmSync } from "node:fs";
import path from "node:path";
import { promisify } from "node:util";
import { type KubeConfig } from "@kubernetes/client-node";
import { LikenApi } from "../api/client.js";
import { loadKubeConfig } from "../api/kubeconfig.js";
import { useCliBundle } from "../cli/entry.js";
import { ensureBinaries } from "../controlplane/build.js";
import { down, up, type ControlPlaneState } from "../controlplane/instance.js";
import { REPO_ROOT } from "../controlplane/paths.js";
import { serveChannel, type ChannelServer } from "../release/serve.js";
import {
  createCluster,
  createMachine,
  createNode,
  defaultFleet,
  type LabMachineSpec,
} from "./fleet.js";
import { buildLabRelease, type LabRelease } from "./releases.js";

const run = promisify(execFile);

/** Where the lab keeps everything; the README names .lab/kubeconfig. */
export const LAB_DIR = path.join(REPO_ROOT, ".lab");
export const LAB_KUBECONFIG = path.join(LAB_DIR, "kubeconfig");
export const LAB_CLUSTER = "lab";
/** The releases the lab channel announces, oldest first; the fleet starts on the first. */
export const LAB_VERSIONS = ["2026.10.10-001", "2026.10.12-001"] as const;

export interface LabOptions {
  machines?: number;
  log?: (line: string) => void;
}

export interface Lab {
  controlPlane: ControlPlaneState;
  api: LikenApi;
  kubeConfig: KubeConfig;
  channel: ChannelServer;
  channelDir: string;
  releases: LabRelease[];
  fleet: LabMachineSpec[];
  binDir: string;
  /** Processes and servers to stop, last started first. */
  stoppers: (() => Promise<void>)[];
}

async function kubectl(lab: Pick<Lab, "binDir">, args: string[]): Promise<string> {
  const { stdout } = await run(path.join(lab.binDir, "kubectl"), args, {
    env: { ...process.env, KUBECONFIG: LAB_KUBECONFIG },
  });
  return stdout;
}

/**
 * Installs liken's API the way the README tells a cluster owner: CRDs, RBAC, the admission
 * policy and the eviction webhook (its operator copies are started by processes.ts).
 */
async function installApi(lab: Pick<Lab, "binDir">): Promise<void> {
  const config = path.join(REPO_ROOT, "config");
  // Namespaces first: the RBAC files name them (kustomize orders this by itself).
  await kubectl(lab, ["apply", "-f", path.join(config, "rbac", "namespaces.yaml")]);
  await kubectl(lab, [
    "apply",
    "-f",
    path.join(config, "crd"),
    "-f",
    path.join(config, "rbac"),
    "-f",
    path.join(config, "admission"),
    "-f",
    path.join(config, "webhook"),
  ]);
  await kubectl(lab, [
    "wait",
    "--for=condition=Established",
    "--timeout=60s",
    "crd/clusters.liken.sh",
    "crd/machines.liken.sh",
  ]);
}

export async function startLab(opts: LabOptions = {}): Promise<Lab> {
  const log = opts.log ?? (() => {});
  const binDir = await ensureBinaries(log);
  // The machines, their downloads and the operators run from one bundle of the CLI.
  await useCliBundle();
  // A lab from an earlier run that was not stopped cleanly: start over.
  await down(LAB_CLUSTER);
  rmSync(path.join(LAB_DIR, "lab"), { recursive: true, force: true });
  mkdirSync(path.join(LAB_DIR, "lab"), { recursive: true });
  const cp = await up({ name: LAB_CLUSTER, log });
  copyFileSync(cp.kubeconfig, LAB_KUBECONFIG);
  const stoppers: Lab["stoppers"] = [async () => void (await down(LAB_CLUSTER))];
  try {
    await installApi({ binDir });
    const channelDir = path.join(LAB_DIR, "lab", "channel");
    const releases: LabRelease[] = [];
    for (const v of LAB_VERSIONS)
      releases.push(await buildLabRelease(channelDir, path.join(LAB_DIR, "lab"), v));
    const channel = await serveChannel(channelDir);
    stoppers.push(() => channel.close());
    const kc = loadKubeConfig(LAB_KUBECONFIG);
    const api = new LikenApi(kc, "liken-lab");
    const fleet = defaultFleet(opts.machines ?? 5);
    await createCluster(api, LAB_CLUSTER, channel.url, releases[0]!);
    for (const m of fleet) {
      await createNode(kc, m.name);
      await createMachine(api, LAB_CLUSTER, m);
    }
    return {
      controlPlane: cp,
      api,
      kubeConfig: kc,
      channel,
      channelDir,
      releases,
      fleet,
      binDir,
      stoppers,
    };
  } catch (e) {
    for (const s of stoppers.reverse()) await s().catch(() => {});
    throw e;
  }
}

export async function stopLab(lab: Lab): Promise<void> {
  for (const s of [...lab.stoppers].reverse()) {
    try {
      await s();
    } catch {
      // keep stopping the rest: nothing may be left running
    }
  }
  lab.stoppers.length = 0;
  if (existsSync(LAB_KUBECONFIG)) rmSync(LAB_KUBECONFIG);
}
