// Heartbeats: each agent renews a coordination.k8s.io/v1 Lease named after its Machine in
// the liken-heartbeats namespace (kubelets do the same in kube-node-lease). A renewal is a
// small write to an object nobody else watches closely, instead of a Machine status write
// every few seconds that would wake every watcher of Machines. cluster-operator lists and
// watches these Leases and marks a Machine Lost after LOST_AFTER_SECONDS of silence.
import { CoordinationV1Api, KubeConfig, V1MicroTime, type V1Lease } from "@kubernetes/client-node";
import { toApiError } from "./errors.js";
import { LeaseRenewal } from "./lease-renewal.js";
import {
  HEARTBEAT_NAMESPACE,
  heartbeatLeaseMetadata,
  LABEL_CLUSTER,
  LABEL_MACHINE,
  LOST_AFTER_SECONDS,
  heartbeatLeaseName,
} from "./types.js";

export interface Heartbeat {
  machine: string;
  cluster: string | undefined;
  /** When the agent last renewed; undefined for a Lease never renewed. */
  renewTime: Date | undefined;
  resourceVersion: string | undefined;
}

export class HeartbeatClient {
  private readonly api: CoordinationV1Api;
  private readonly renewal: LeaseRenewal<V1Lease>;

  constructor(kubeConfig: KubeConfig) {
    this.api = kubeConfig.makeApiClient(CoordinationV1Api);
    const namespace = HEARTBEAT_NAMESPACE;
    this.renewal = new LeaseRenewal<V1Lease>({
      read: async (name) => {
        try {
          return await this.api.readNamespacedLease({ name, namespace });
        } catch (e) {
          const err = toApiError(e, { verb: "read heartbeat", kind: "Lease", name });
          if (err.httpStatus === 404) return undefined;
          throw err;
        }
      },
      create: (name, machine, cluster, now) =>
        this.api.createNamespacedLease({
          namespace,
          body: {
            metadata: heartbeatLeaseMetadata(name, machine, cluster),
            spec: this.spec(machine, now),
          },
        }),
      renew: (name, base, machine, now) =>
        this.api.replaceNamespacedLease({
          name,
          namespace,
          body: { ...base, spec: { ...base.spec, ...this.spec(machine, now) } },
        }),
    });
  }

  /** API requests renew() made, for tests. */
  get requests(): number {
    return this.renewal.requests;
  }

  /** Renew (or create on first use) the Lease of `machine`, stamped `now` (lease-renewal.ts). */
  async renew(machine: string, cluster: string, now: Date = new Date()): Promise<Heartbeat> {
    return toHeartbeat(
      await this.renewal.renew(heartbeatLeaseName(machine), machine, cluster, now),
    );
  }

  /** Every heartbeat, or those of one cluster. */
  async list(cluster?: string): Promise<Heartbeat[]> {
    try {
      const list = await this.api.listNamespacedLease({
        namespace: HEARTBEAT_NAMESPACE,
        ...(cluster === undefined ? {} : { labelSelector: `${LABEL_CLUSTER}=${cluster}` }),
      });
      return list.items.map(toHeartbeat);
    } catch (e) {
      throw toApiError(e, { verb: "list heartbeats of", kind: "Cluster", name: cluster ?? "*" });
    }
  }

  private spec(machine: string, now: Date): V1Lease["spec"] {
    return {
      holderIdentity: machine,
      leaseDurationSeconds: LOST_AFTER_SECONDS,
      // MicroTime: the server parses exactly six fractional digits.
      renewTime: new V1MicroTime(now.getTime()),
    };
  }
}

function toHeartbeat(lease: V1Lease): Heartbeat {
  const renew = lease.spec?.renewTime;
  return {
    machine: lease.metadata?.labels?.[LABEL_MACHINE] ?? lease.metadata?.name ?? "",
    cluster: lease.metadata?.labels?.[LABEL_CLUSTER],
    renewTime: renew === undefined ? undefined : new Date(renew),
    resourceVersion: lease.metadata?.resourceVersion,
  };
}

/** Whether a heartbeat is older than LOST_AFTER_SECONDS at `now` (pure; for the operator). */
export function isSilent(hb: Pick<Heartbeat, "renewTime">, now: Date): boolean {
  if (hb.renewTime === undefined) return true;
  return now.getTime() - hb.renewTime.getTime() >= LOST_AFTER_SECONDS * 1000;
}
