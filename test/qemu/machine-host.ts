// The host side of the machine scenario: the real control plane (owned by this process, with
// the control plane's reaper for a SIGKILL), liken's API installed as a cluster owner does,
// cluster-operator, the release channel with the guest's three releases built by
// `liken release build`, the Cluster, the Machine, and the fleet's bootstrap token (the machine
// joins for its own identity); for the lab's stand-in, a kwok Node with its workload; for the QEMU
// guest, its kubelet's identity (the kubelet registers the Node). `stop()` ends all of it.
import { execFile } from "node:child_process";
import { mkdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { promisify } from "node:util";
import { type KubeConfig } from "@kubernetes/client-node";
import { LikenApi } from "../../src/api/client.js";
import { loadKubeConfig } from "../../src/api/kubeconfig.js";
import { API_VERSION, type Cluster, type Machine, type ReleaseRef } from "../../src/api/types.js";
import { likenEntry, useCliBundle } from "../../src/cli/entry.js";
import { ensureBinaries } from "../../src/controlplane/build.js";
import type { ControlPlaneState } from "../../src/controlplane/instance.js";
import { installApi } from "../../src/lab/lab.js";
import { operatorKubeconfig, startOperator } from "../../src/lab/processes.js";
import { startWebhookService } from "../../src/lab/webhook-service.js";
import { EVICTION_PATH } from "../../src/operator/webhook/names.js";
import { serveChannel, type ChannelServer } from "../../src/release/serve.js";
import { startConnectProxy } from "../support/connect-proxy.js";
import { upOwned } from "../support/controlplane-owned.js";
import { makeBootstrapToken, type BootstrapIdentity } from "./machine-identity.js";
import { bindNodeRole, issueKubeletCert, type KubeletIdentity } from "./kubelet-identity.js";
import { createNode, placeWorkload, spareNode } from "./machine-workload.js";

const run = promisify(execFile);

export interface HostOptions {
  /** Unique per run: the control plane's name. */
  name: string;
  dir: string;
  machine: string;
  cluster: string;
  /** The three releases, oldest first: slot images, and the kernel and initrd if they bring them. */
  releases: readonly HostRelease[];
  /** The channel's URL as the machine reaches it (the Cluster's spec.releases.source). */
  channelSource: (hostUrl: string) => string;
  /** Upper bound of the operator's life, in seconds (it runs under `timeout`). */
  lifetimeSeconds: number;
  /**
   * The machine's Node is a real kubelet (the QEMU guest): it registers the Node itself, and
   * the workload is placed once it is Ready (machine-phases.ts); the host issues the kubelet's
   * identity. Otherwise (the lab's stand-in) the Node is a kwok Node with the workload on it.
   */
  realNode: boolean;
  log: (line: string) => void;
}

/** A release as the host publishes it. */
export interface HostRelease {
  version: string;
  slotImage: string;
  bootFiles?: { kernel: string; initrd: string };
}

export interface Host {
  controlPlane: ControlPlaneState;
  kc: KubeConfig;
  api: LikenApi;
  channel: ChannelServer;
  /** The channel's directory: <version>/release.yaml of each release. */
  channelDir: string;
  releases: ReleaseRef[];
  /** The fleet's bootstrap token: the machine starts with it alone. */
  identity: BootstrapIdentity;
  /** The guest kubelet's identity (realNode only). */
  kubelet?: KubeletIdentity;
  /** Seconds each part took to come up. */
  timings: Record<string, number>;
  /** Bytes and requests the channel served per release version (adaptive downloads). */
  served: Record<string, { bytes: number; requests: number }>;
  stop(): Promise<void>;
}

/**
 * `liken release build ... -a rootfs=<slot image>@0 [-a kernel=... -a initrd=...]`, as
 * docs/machine.md tells an image builder: the slot image at offset 0 so the slot mounts, the boot
 * files after it for a bootloader that loads them from the ESP (docs/releases.md).
 */
async function buildRelease(channelDir: string, r: HostRelease) {
  const boot = r.bootFiles;
  const { stdout } = await run(process.execPath, [
    likenEntry(),
    "release",
    "build",
    "--version",
    r.version,
    "--out",
    channelDir,
    "-a",
    `rootfs=${r.slotImage}@0`,
    ...(boot === undefined ? [] : ["-a", `kernel=${boot.kernel}`, "-a", `initrd=${boot.initrd}`]),
  ]);
  const version = r.version;
  const digest = /sha256:[0-9a-f]{64}/.exec(stdout)?.[0];
  if (digest === undefined) throw new Error(`liken release build printed no digest:\n${stdout}`);
  return { version, digest };
}

export async function startHost(o: HostOptions): Promise<Host> {
  const timings: Record<string, number> = {};
  const timed = async <T>(what: string, f: () => Promise<T>): Promise<T> => {
    const t0 = Date.now();
    const r = await f();
    timings[what] = (Date.now() - t0) / 1000;
    return r;
  };
  const stoppers: (() => Promise<void>)[] = [];
  const stop = async (): Promise<void> => {
    for (const s of stoppers.splice(0).reverse()) await s().catch(() => undefined);
  };
  try {
    mkdirSync(o.dir, { recursive: true });
    const binDir = await ensureBinaries(o.log);
    await useCliBundle();
    // With the control plane's reaper, for a SIGKILL (test/support/controlplane-owned.ts).
    const owned = await timed("control plane", () => upOwned(o.name, o.log));
    stoppers.push(owned.stop);
    const cp = owned.state;
    await timed("API install", () => installApi(binDir, cp.kubeconfig));
    const kc = loadKubeConfig(cp.kubeconfig);
    const api = new LikenApi(kc, "liken-machine-scenario");

    const channelDir = path.join(o.dir, "channel");
    const releases = await timed("releases", async () => {
      const out: ReleaseRef[] = [];
      for (const r of o.releases) out.push(await buildRelease(channelDir, r));
      return out;
    });
    const served: Host["served"] = {};
    const channel = await serveChannel(channelDir, 0, "127.0.0.1", (rel, bytes) => {
      const v = (served[rel.split("/")[1] ?? ""] ??= { bytes: 0, requests: 0 });
      v.bytes += bytes;
      v.requests++;
    });
    stoppers.push(() => channel.close());
    // The operator reads the channel at the guest's address, as the Cluster names it, through
    // a proxy that knows where that address is on this host: the proxy variables a fleet
    // behind a proxy sets (src/verify/proxy.ts). Anything else the proxy refuses.
    const guestChannel = new URL(o.channelSource(channel.url)).host;
    const hostChannel = new URL(channel.url);
    const proxy = await startConnectProxy((target) =>
      target === guestChannel
        ? { host: hostChannel.hostname, port: Number(hostChannel.port) }
        : undefined,
    );
    stoppers.push(() => proxy.close());

    const cluster: Cluster = {
      apiVersion: API_VERSION,
      kind: "Cluster",
      metadata: { name: o.cluster },
      spec: {
        version: releases[0]!.version,
        releases: { source: o.channelSource(channel.url), catalog: releases },
        disruption: { maxUnavailable: 1 },
        // One failed trial of a release stops its rollout (docs/rollout-brakes.md): v3's
        // fallback is recorded and counted, and no machine tries it again.
        rollout: { maxFailedTrials: 1 },
      },
    };
    await api.clusters.create(cluster);
    if (!o.realNode) {
      await timed("node and workload", async () => {
        await createNode(kc, o.machine);
        await placeWorkload(kc, o.machine, spareNode(o.machine));
      });
    }
    const machine: Machine = {
      apiVersion: API_VERSION,
      kind: "Machine",
      metadata: { name: o.machine },
      spec: { cluster: o.cluster, nodeName: o.machine, role: "Worker", rebootPolicy: "Auto" },
    };
    await api.machines.create(machine);
    const identity = await timed("bootstrap token", () => makeBootstrapToken(kc));
    const kubelet = o.realNode
      ? await timed("kubelet identity", async () => {
          await bindNodeRole(kc);
          return issueKubeletCert(kc, o.dir, o.machine);
        })
      : undefined;

    // cluster-operator with its eviction webhook, as the lab runs it (one copy is enough here).
    const opKubeconfig = await operatorKubeconfig(
      { binDir, controlPlane: cp },
      path.join(o.dir, "operator.kubeconfig"),
    );
    const service = await startWebhookService(1);
    stoppers.push(() => service.close());
    const operatorPid = startOperator(
      { stoppers },
      opKubeconfig,
      "operator-1",
      { port: service.backends[0]!, url: `https://127.0.0.1:${service.port}${EVICTION_PATH}` },
      {
        logFile: path.join(o.dir, "operator.log"),
        lifetimeSeconds: o.lifetimeSeconds,
        env: { http_proxy: proxy.url, no_proxy: "" },
      },
    );
    // On an exit without stop() (an uncaught error, a signal handler's exit), end the operator
    // here; the control plane has its reaper, QEMU its own handler (testbed/qemu.ts).
    const onExit = (): void => {
      try {
        process.kill(operatorPid, "SIGTERM");
      } catch {
        // already gone
      }
    };
    process.once("exit", onExit);
    stoppers.unshift(async () => void process.off("exit", onExit));
    return {
      controlPlane: cp,
      kc,
      api,
      channel,
      channelDir,
      releases,
      identity,
      ...(kubelet ? { kubelet } : {}),
      timings,
      served,
      stop,
    };
  } catch (e) {
    await stop();
    throw e;
  }
}

/** The control plane's CA, which the machine's kubeconfig carries. */
export function caPem(host: Host): string {
  return readFileSync(host.controlPlane.certs.caCert, "utf8");
}
