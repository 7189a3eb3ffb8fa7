// What integration tests need from their control plane: the one this file leased
// (controlplane-lease.ts), or the run's first (controlplane-setup.ts).
import { execFile } from "node:child_process";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import path from "node:path";
import { randomBytes } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { CoreV1Api, KubeConfig } from "@kubernetes/client-node";
import { loadKubeConfig } from "../../src/api/kubeconfig.js";
import { inject } from "vitest";
import type { ControlPlaneState } from "../../src/controlplane/instance.js";
import { mintClientCert as mint } from "../../src/controlplane/certs.js";
import { kubeconfigYaml } from "../../src/api/kubeconfig-doc.js";
import { addressKwokNode, kwokNode } from "../../src/controlplane/kwok.js";
import { deleteNamespaces as deleteAll } from "./namespaces.js";

export interface ControlPlaneInfo {
  server: string;
  kubeconfig: string;
  binDir: string;
  dataDir: string;
  /**
   * CA that the API server trusts for client certificates (the local CA, which also signed the
   * serving certificate; the current signers' CA on a control plane whose client CA rotates).
   */
  clientCaCert: string;
  clientCaKey: string;
  /** CA that signed the API server's serving certificate. */
  serverCaCert: string;
}

/** The control plane this test file holds, once controlplane-lease.ts took one. */
let leased: ControlPlaneState | undefined;

/** For controlplane-lease.ts: every helper here talks to `s` from now on. */
export function useControlPlane(s: ControlPlaneState | undefined): void {
  leased = s;
}

/** The control plane useControlPlane set last (undefined: the run's first, by inject). */
export function usedControlPlane(): ControlPlaneState | undefined {
  return leased;
}

export function controlPlane(): ControlPlaneInfo {
  const s = leased ?? inject("controlPlane");
  return {
    server: s.server,
    kubeconfig: s.kubeconfig,
    binDir: s.binDir,
    dataDir: s.dataDir,
    clientCaCert: s.clientCa?.signerCert ?? s.certs.caCert,
    clientCaKey: s.clientCa?.signerKey ?? s.certs.caKey,
    serverCaCert: s.certs.caCert,
  };
}

export function kubeconfigPath(): string {
  return controlPlane().kubeconfig;
}

/** The admin KubeConfig (system:masters). */
export function kubeConfig(file = kubeconfigPath()): KubeConfig {
  return loadKubeConfig(file);
}

export function uniqueName(prefix: string): string {
  return `${prefix}-${randomBytes(3).toString("hex")}`;
}

export interface KubectlResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** The pinned kubectl against the test control plane; never throws on a non-zero exit. */
export function kubectl(
  args: string[],
  opts: { input?: string; env?: NodeJS.ProcessEnv; kubeconfig?: string } = {},
): Promise<KubectlResult> {
  const cp = controlPlane();
  return new Promise((resolve) => {
    const child = execFile(
      path.join(cp.binDir, "kubectl"),
      args,
      {
        env: { ...process.env, ...opts.env, KUBECONFIG: opts.kubeconfig ?? cp.kubeconfig },
        maxBuffer: 64 * 1024 * 1024,
      },
      (error, stdout, stderr) => {
        const code = error ? (typeof error.code === "number" ? error.code : 1) : 0;
        resolve({ code, stdout, stderr });
      },
    );
    if (opts.input !== undefined) child.stdin?.end(opts.input);
  });
}

/**
 * A client certificate for a real identity (CN = user, O = groups), signed by the CA the
 * API server trusts, and a kubeconfig that uses it: requests go through authentication,
 * RBAC and admission exactly as a machine's would.
 */
export function mintClientCert(opts: { user: string; groups?: string[] }): {
  certFile: string;
  keyFile: string;
  kubeconfig: string;
} {
  const cp = controlPlane();
  const dir = path.join(cp.dataDir, "clients");
  mkdirSync(dir, { recursive: true });
  const sub = mkdtempSync(path.join(dir, "id-"));
  const { certFile, keyFile } = mint(
    { caCert: cp.clientCaCert, caKey: cp.clientCaKey },
    sub,
    opts.user,
    opts.groups ?? [],
  );
  const kubeconfig = path.join(sub, "kubeconfig");
  writeFileSync(
    kubeconfig,
    kubeconfigYaml({
      server: cp.server,
      caFile: cp.serverCaCert,
      user: opts.user,
      credentials: { certFile, keyFile },
    }),
  );
  return { certFile, keyFile, kubeconfig };
}

/**
 * Polls until `probe` returns a truthy value, with a deadline. On the deadline it throws an
 * error naming what it waited for and the last value or error it saw.
 */
export async function waitFor<T>(
  what: string,
  probe: () => Promise<T | undefined | null | false>,
  opts: { timeoutMs?: number; intervalMs?: number } = {},
): Promise<T> {
  const deadline = Date.now() + (opts.timeoutMs ?? 30_000);
  let last: unknown;
  for (;;) {
    try {
      const v = await probe();
      if (v) return v;
      last = v;
    } catch (e) {
      last = e;
    }
    if (Date.now() > deadline) {
      const seen = last instanceof Error ? last.message : JSON.stringify(last);
      throw new Error(
        `timed out after ${opts.timeoutMs ?? 30_000} ms waiting for ${what}; last seen: ${seen}`,
      );
    }
    await sleep(opts.intervalMs ?? 200);
  }
}

/** The namespaces createNamespace made in this test file, until deleteNamespaces. */
const madeNamespaces = new Set<string>();

/**
 * A fresh namespace, ready for pods: its default ServiceAccount exists (admission needs it).
 * The file deletes it with `afterAll(deleteNamespaces)`: the integration tier fails a file that
 * leaves a namespace (controlplane-lease.ts).
 */
export async function createNamespace(prefix: string): Promise<string> {
  const core = kubeConfig().makeApiClient(CoreV1Api);
  const name = uniqueName(prefix);
  await core.createNamespace({ body: { metadata: { name } } });
  madeNamespaces.add(name);
  await waitFor(`the default ServiceAccount in namespace ${name}`, async () => {
    try {
      return await core.readNamespacedServiceAccount({ name: "default", namespace: name });
    } catch {
      return undefined;
    }
  });
  return name;
}

/**
 * Deletes every namespace createNamespace made in this file (the namespace controller then
 * empties and removes each, not waited for: test/support/namespaces.ts), so that the file
 * leaves none behind. A file calls it last: `afterAll(deleteNamespaces)` registered at the top
 * level before any other hook runs after them all (afterAll hooks run in reverse), once what
 * ran in those namespaces has stopped.
 */
export async function deleteNamespaces(): Promise<void> {
  const names = [...madeNamespaces];
  await deleteAll(kubeConfig().makeApiClient(CoreV1Api), names);
  for (const n of names) madeNamespaces.delete(n);
}

/**
 * A Node that kwok keeps Ready: the real scheduler places pods on it, kwok marks them Running
 * and Ready and removes pods that are being deleted (there is no kubelet).
 */
export async function createKwokNode(
  name: string,
  opts: { labels?: Record<string, string>; cpu?: string; memory?: string; pods?: string } = {},
): Promise<void> {
  const core = kubeConfig().makeApiClient(CoreV1Api);
  await core.createNode({
    body: kwokNode(name, {
      labels: { type: "kwok", ...opts.labels },
      capacity: { cpu: opts.cpu ?? "32", memory: opts.memory ?? "256Gi", pods: opts.pods ?? "110" },
    }),
  });
  await addressKwokNode(kubeConfig(), name);
  await waitFor(`node ${name} Ready (kwok)`, async () => {
    const n = await core.readNode({ name });
    return n.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True");
  });
}

/** A KubeConfig that authenticates with a fresh token of a ServiceAccount (as its pod would). */
export async function serviceAccountKubeConfig(
  namespace: string,
  name: string,
): Promise<KubeConfig> {
  const token = await kubectl(["-n", namespace, "create", "token", name]);
  if (token.code !== 0)
    throw new Error(`kubectl create token ${namespace}/${name}: ${token.stderr}`);
  const cluster = kubeConfig().getCurrentCluster()!;
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [cluster],
    users: [{ name, token: token.stdout.trim() }],
    contexts: [{ name, cluster: cluster.name, user: name }],
    currentContext: name,
  });
  return kc;
}

export interface EventSeen {
  reason: string;
  message: string;
  type: string;
  firstTimestamp: string;
}

/**
 * The Events in namespace default that a field selector picks (those about a cluster-scoped
 * object, a Cluster or a CertificateSigningRequest, are recorded there).
 */
export async function eventsWhere(selector: string): Promise<EventSeen[]> {
  const r = await kubectl([
    "get",
    "events",
    "-n",
    "default",
    "--field-selector",
    selector,
    "-o",
    "json",
  ]);
  return (JSON.parse(r.stdout) as { items: EventSeen[] }).items;
}

/** The messages of the Events about a Cluster with one reason, joined by spaces. */
export async function clusterEventMessages(cluster: string, reason: string): Promise<string> {
  const events = await eventsWhere(`involvedObject.name=${cluster},reason=${reason}`);
  return events.map((e) => e.message).join(" ");
}
