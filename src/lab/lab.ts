// The lab: a local control plane, liken's API, a release channel with releases built on the
// spot, cluster-operator, and a fleet of simulated machines each running the real agent.
// Everything it starts it records, and `stop()` ends it all (Ctrl-C in the foreground).
import { execFile } from "node:child_process";
import { copyFileSync, mkdirSync, rmSync } from "node:fs";
import path from "node:path";
import { promisify } from "node:util";
import { type KubeConfig } from "@kubernetes/client-node";
import { LikenApi } from "../api/client.js";
import { loadKubeConfig } from "../api/kubeconfig.js";
import { useCliBundle } from "../cli/entry.js";
import { ensureBinaries } from "../controlplane/build.js";
import { down, up, type ControlPlaneState } from "../controlplane/instance.js";
import { setTimeout as sleep } from "node:timers/promises";
import { claimLab, reapLab, releaseClaim, startReaper } from "./reap.js";
import { REPO_ROOT } from "../controlplane/paths.js";
import { serveChannel, type ChannelServer } from "../release/serve.js";
import {
  createCluster,
  createMachine,
  createNode,
  defaultFleet,
  type LabMachineSpec,
} from "./fleet.js";
import { LAB_CLUSTER, LAB_DIR, LAB_KUBECONFIG, LAB_RING_KUBECONFIG } from "./paths.js";
import { buildLabImageRelease, buildLabRelease, type LabRelease } from "./releases.js";

const run = promisify(execFile);

export { LAB_CLUSTER, LAB_DIR, LAB_KUBECONFIG } from "./paths.js";
/** The releases the lab channel announces, oldest first; the fleet starts on the first. */
export const LAB_VERSIONS = ["2026.10.10-001", "2026.10.12-001"] as const;

export interface LabOptions {
  machines?: number;
  log?: (line: string) => void;
  /** How long the signer's certificates last (default LAB_SIGNING_DURATION_SECONDS). */
  signingDurationSeconds?: number;
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
  /** After the stoppers: kill what is left, give the place up, stop the reaper (reap.ts). */
  finish: () => Promise<void>;
}

async function kubectl(binDir: string, kubeconfig: string, args: string[]): Promise<string> {
  const { stdout } = await run(path.join(binDir, "kubectl"), args, {
    env: { ...process.env, KUBECONFIG: kubeconfig },
  });
  return stdout;
}

/**
 * Installs liken's API the way the README tells a cluster owner: CRDs, RBAC, the admission
 * policy and the eviction webhook (its operator copies are started by processes.ts).
 */
export async function installApi(binDir: string, kubeconfig = LAB_KUBECONFIG): Promise<void> {
  const config = path.join(REPO_ROOT, "config");
  const k = (args: string[]): Promise<string> => kubectl(binDir, kubeconfig, args);
  // Namespaces first: the RBAC files name them (kustomize orders this by itself).
  await k(["apply", "-f", path.join(config, "rbac", "namespaces.yaml")]);
  await k([
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
  await k([
    "wait",
    "--for=condition=Established",
    "--timeout=60s",
    "crd/clusters.liken.sh",
    "crd/machines.liken.sh",
  ]);
}

/**
 * The lab's signer issues 5-minute certificates, so a person watching a rollout sees every
 * machine renew its identity (at 3.5 to 4.5 minutes) without waiting a year.
 */
export const LAB_SIGNING_DURATION_SECONDS = 300;

export async function startLab(opts: LabOptions = {}): Promise<Lab> {
  const log = opts.log ?? (() => {});
  // First of all: from here on, whatever ends this process, the reaper ends what it started.
  claimLab();
  const stopReaper = startReaper();
  // Also the way out of a second Ctrl-C: the kubeconfig of a lab that is gone goes with it.
  const finish = async (): Promise<void> => {
    await reapLab(log);
    releaseClaim();
    stopReaper();
    rmSync(LAB_KUBECONFIG, { force: true });
    rmSync(LAB_RING_KUBECONFIG, { force: true });
  };
  // A lab from an earlier run that was not stopped cleanly: its agents, operators and
  // control plane go, then its files.
  await reapLab(log);
  // The rings scene's second kubeconfig, left by a lab that was killed: its API server is gone,
  // and a watcher waiting for the file (test/e2e/lab-support.ts) must wait for the new one.
  rmSync(LAB_RING_KUBECONFIG, { force: true });
  const binDir = await ensureBinaries(log);
  // The machines, their downloads and the operators run from one bundle of the CLI.
  await useCliBundle();
  rmSync(path.join(LAB_DIR, "lab"), { recursive: true, force: true });
  mkdirSync(path.join(LAB_DIR, "lab"), { recursive: true });
  const cp = await up({
    name: LAB_CLUSTER,
    log,
    signingDurationSeconds: opts.signingDurationSeconds ?? LAB_SIGNING_DURATION_SECONDS,
  });
  copyFileSync(cp.kubeconfig, LAB_KUBECONFIG);
  const stoppers: Lab["stoppers"] = [async () => void (await down(LAB_CLUSTER))];
  try {
    await installApi(binDir);
    const channelDir = path.join(LAB_DIR, "lab", "channel");
    const releases: LabRelease[] = [];
    // The first release from plain artifacts (`liken release build -a`), the second from a
    // Containerfile (buildah, then `liken release build --from-image`), as docs/day-1.md does.
    const work = path.join(LAB_DIR, "lab");
    releases.push(await buildLabRelease(channelDir, work, LAB_VERSIONS[0]));
    releases.push(await buildLabImageRelease(channelDir, work, LAB_VERSIONS[1]));
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
      finish,
    };
  } catch (e) {
    for (const s of stoppers.reverse()) await s().catch(() => {});
    await finish();
    throw e;
  }
}

/**
 * How long the stoppers get in all: an agent finishes or abandons its step on SIGTERM within
 * seconds; past this, whatever still runs is killed (a lab must never hang on its way out).
 */
const STOP_DEADLINE_MS = 30_000;

export async function stopLab(lab: Lab): Promise<void> {
  const stoppers = [...lab.stoppers].reverse();
  lab.stoppers.length = 0;
  const inOrder = async (): Promise<void> => {
    for (const s of stoppers) {
      try {
        await s();
      } catch {
        // keep stopping the rest: nothing may be left running
      }
    }
  };
  await Promise.race([inOrder(), sleep(STOP_DEADLINE_MS, undefined, { ref: false })]);
  await lab.finish();
}
