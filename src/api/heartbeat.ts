// Heartbeats: each agent renews a coordination.k8s.io/v1 Lease named after its Machine in
// the liken-heartbeats namespace (kubelets do the same in kube-node-lease). A renewal is a
// small write to an object nobody else watches closely, instead of a Machine status write
// every few seconds that would wake every watcher of Machines. cluster-operator lists and
// watches these Leases and marks a Machine Lost after LOST_AFTER_SECONDS of silence.
import { CoordinationV1Api, KubeConfig, V1MicroTime, type V1Lease } from "@kubernetes/client-node";
import { toApiError } from "./errors.js";
import {
  HEARTBEAT_NAMESPACE,
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
  /** The Lease each machine last wrote, as the server returned it: the next renewal's base. */
  private readonly written = new Map<string, V1Lease>();
  /** API requests made by renew(), for tests and the bench. */
  requests = 0;

  constructor(kubeConfig: KubeConfig) {
    this.api = kubeConfig.makeApiClient(CoordinationV1Api);
  }

  /**
   * Renew (or create on first use) the Lease of `machine`, stamped `now`. As the kubelet
   * renews its node Lease: one PUT of the object this client last wrote, conditioned on its
   * resourceVersion, and no GET. Only when there is no such object yet, or the PUT met a
   * newer one (409: someone else wrote it) or none (404: deleted), is the Lease read (or
   * created) and written again, once; a second conflict is the caller's error to log.
   */
  async renew(machine: string, cluster: string, now: Date = new Date()): Promise<Heartbeat> {
    const name = heartbeatLeaseName(machine);
    const op = { verb: "renew heartbeat of", kind: "Machine", name: machine };
    const last = this.written.get(name);
    if (last !== undefined) {
      try {
        return this.remember(name, await this.replace(name, last, machine, now));
      } catch (e) {
        const err = toApiError(e, op);
        if (err.httpStatus !== 409 && err.httpStatus !== 404) throw err;
        this.written.delete(name);
      }
    }
    try {
      const current = await this.read(name);
      const lease =
        current === undefined
          ? await this.create(name, machine, cluster, now)
          : await this.replace(name, current, machine, now);
      return this.remember(name, lease);
    } catch (e) {
      throw toApiError(e, op);
    }
  }

  private remember(name: string, lease: V1Lease): Heartbeat {
    this.written.set(name, lease);
    return toHeartbeat(lease);
  }

  private async read(name: string): Promise<V1Lease | undefined> {
    this.requests++;
    try {
      return await this.api.readNamespacedLease({ name, namespace: HEARTBEAT_NAMESPACE });
    } catch (e) {
      const err = toApiError(e, { verb: "read heartbeat", kind: "Lease", name });
      if (err.httpStatus === 404) return undefined;
      throw err;
    }
  }

  private create(name: string, machine: string, cluster: string, now: Date): Promise<V1Lease> {
    this.requests++;
    return this.api.createNamespacedLease({
      namespace: HEARTBEAT_NAMESPACE,
      body: {
        metadata: { name, labels: { [LABEL_CLUSTER]: cluster, [LABEL_MACHINE]: machine } },
        spec: this.spec(machine, now),
      },
    });
  }

  /** PUT with the resourceVersion of `base`: a racing writer is a 409, not a lost write. */
  private replace(name: string, base: V1Lease, machine: string, now: Date): Promise<V1Lease> {
    this.requests++;
    return this.api.replaceNamespacedLease({
      name,
      namespace: HEARTBEAT_NAMESPACE,
      body: { ...base, spec: { ...base.spec, ...this.spec(machine, now) } },
    });
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
