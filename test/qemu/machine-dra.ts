// The DRA part of the machine scenario on a real node: before the drain, the test driver runs
// on the guest's Node (a DaemonSet pod, kubelet-plugin mode) and a pod there holds one of its
// claims (dra-manifests.ts); after the promotion, the drain's record and the driver's own log
// lines (copied to the serial console by the image's liken-dra-log unit) must show the holder
// stopped, then the driver unprepared its claim, then the kubelet began to stop the driver
// (dra-order.ts): `dra-unprepare-before-driver` on the summary line.
import {
  CoreV1Api,
  KubernetesObjectApi,
  ResourceV1Api,
  type KubeConfig,
  type KubernetesObject,
  type V1Pod,
} from "@kubernetes/client-node";
import { setTimeout as sleep } from "node:timers/promises";
import { DRA_CONSOLE_MARK, WORKLOAD_IMAGE } from "../../testbed/machine/node.js";
import { GUEST_API } from "../../testbed/machine/contract.js";
import { recordNamespace, type Recorder } from "../support/drain-helpers.js";
import { violations } from "../support/drain-invariants.js";
import {
  claimHolder,
  claimTemplate,
  deviceClass,
  DRA_DRIVER,
  driverDaemonSet,
  driverKubeconfig,
  driverRbac,
  type DraSetup,
} from "./dra-manifests.js";
import { draVerdict } from "./dra-order.js";
import { readKillingTimes } from "./kubelet-killing.js";
import { API_TLS_SERVER_NAME } from "./machine-identity.js";
import { WORKLOAD_GRACE_S, WORKLOAD_LINGER_S } from "./machine-workload.js";

export const DRA_NAMESPACE = "dra";
/**
 * The driver's image imported at boot, its pod started and registered with the kubelet, its
 * ResourceSlice published, the claim allocated and prepared and the holder started: each a
 * few seconds on a quiet host, several times that under TCG on two busy cores.
 */
const DRA_READY_MS = 300_000;

export interface DraRun {
  recorder: Recorder;
  claimUid: string;
  driverUid: string;
}

const isHolder = (p: V1Pod): boolean => p.metadata?.labels?.app === "dra-holder";
const isDriver = (p: V1Pod): boolean => p.metadata?.labels?.app === "dra-test-driver";
const ready = (p: V1Pod | undefined): boolean =>
  (p?.status?.conditions ?? []).some((c) => c.type === "Ready" && c.status === "True");

async function createAll(kc: KubeConfig, objects: object[]): Promise<void> {
  const api = KubernetesObjectApi.makeApiClient(kc);
  for (const o of objects) await api.create(o as KubernetesObject);
}

/** Applies the driver and the holder on `node`; returns once the holder runs with its claim. */
export async function placeDra(
  kc: KubeConfig,
  node: string,
  caPem: string,
  say: (l: string) => void,
): Promise<DraRun> {
  const s: DraSetup = {
    namespace: DRA_NAMESPACE,
    node,
    apiServer: GUEST_API,
    caPem,
    tlsServerName: API_TLS_SERVER_NAME,
    holderImage: WORKLOAD_IMAGE,
    holderGraceSeconds: WORKLOAD_GRACE_S,
    holderLingerSeconds: WORKLOAD_LINGER_S,
  };
  const t = Date.now();
  await kc.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: s.namespace } } });
  await createAll(kc, [
    ...driverRbac(s),
    driverKubeconfig(s),
    deviceClass(),
    driverDaemonSet(s),
    claimTemplate(s),
  ]);
  const recorder = await recordNamespace(s.namespace, kc);
  const core = kc.makeApiClient(CoreV1Api);
  const podsNow = async (): Promise<V1Pod[]> =>
    (await core.listNamespacedPod({ namespace: s.namespace })).items;
  const deadline = Date.now() + DRA_READY_MS;
  const until = async (what: string, ok: (pods: V1Pod[]) => boolean): Promise<V1Pod[]> => {
    for (;;) {
      const pods = await podsNow();
      if (ok(pods)) return pods;
      if (Date.now() > deadline) {
        const states = pods.map((p) => `${p.metadata?.name} ${p.status?.phase}`).join(", ");
        throw new Error(
          `${what} within ${DRA_READY_MS / 1000} s of applying the DRA manifests (pods: ${states || "none"}; the console's ${DRA_CONSOLE_MARK} lines and the kubelet's say why)`,
        );
      }
      await sleep(500);
    }
  };
  const withDriver = await until(`the DRA test driver's pod was not Ready on ${node}`, (ps) =>
    ps.some((p) => isDriver(p) && ready(p)),
  );
  const driver = withDriver.find(isDriver)!;
  say(
    `dra: driver pod ${driver.metadata?.name} Ready in ${((Date.now() - t) / 1000).toFixed(1)} s`,
  );
  await core.createNamespacedPod({ namespace: s.namespace, body: claimHolder(s) });
  const withHolder = await until(`the claim holder was not Ready on ${node}`, (ps) =>
    ps.some((p) => isHolder(p) && ready(p)),
  );
  const holder = withHolder.find(isHolder)!;
  const claimName = holder.status?.resourceClaimStatuses?.[0]?.resourceClaimName;
  if (claimName === undefined || claimName === null)
    throw new Error(`claim holder ${holder.metadata?.name} runs but names no ResourceClaim`);
  const claim = await kc
    .makeApiClient(ResourceV1Api)
    .readNamespacedResourceClaim({ namespace: s.namespace, name: claimName });
  say(
    `dra: claim ${claimName} (${claim.metadata?.uid}) allocated by ${DRA_DRIVER} and held by ${holder.metadata?.name} on ${node}, ${((Date.now() - t) / 1000).toFixed(1)} s after the manifests`,
  );
  return { recorder, claimUid: claim.metadata!.uid!, driverUid: driver.metadata!.uid! };
}

/** The driver's CRI log lines as the guest's console carried them (mark removed). */
export function driverLines(console: readonly string[]): string[] {
  const mark = `${DRA_CONSOLE_MARK} `;
  return console.flatMap((l) => {
    const at = l.indexOf(mark);
    return at < 0 ? [] : [l.slice(at + mark.length)];
  });
}

/**
 * After the drain: the holder stopped, the driver unprepared its claim, then the kubelet began
 * to stop the driver (all on the guest's clock), and no driver pod left while its claim was
 * still reserved (the API server's record).
 */
export async function draChecks(
  kc: KubeConfig,
  node: string,
  run: DraRun,
  console: readonly string[],
  say: (l: string) => void,
): Promise<string[]> {
  run.recorder.stop();
  const killing = await readKillingTimes(kc, DRA_NAMESPACE);
  const lines = driverLines(console);
  const verdict = draVerdict(
    run.recorder.log,
    lines,
    { node, holder: isHolder, driver: isDriver, claimUid: run.claimUid },
    killing,
  );
  const o = verdict.order;
  if (o !== undefined)
    say(
      `dra: claim ${run.claimUid} unprepared by the driver ${(o.unprepared - o.holderStopped).toFixed(1)} s after its holder stopped and ${(o.driverStopBegan - o.unprepared).toFixed(1)} s before the kubelet began to stop the driver (the guest's clock, whole seconds on the API)`,
    );
  const broken = violations(run.recorder.log, {
    node,
    drivers: [{ uid: run.driverUid, driver: DRA_DRIVER }],
    budgets: [],
  });
  return [...verdict.problems, ...broken];
}
