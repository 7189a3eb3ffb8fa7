// Leader election through a coordination.k8s.io Lease in liken-system, for efficiency
// only: with two copies running, the one that does not hold the Lease stays warm (it keeps
// watching) but writes nothing, so the copies do not trade 409s. Correctness never rests
// on it: every turn is recorded with a write conditioned on the Cluster's resourceVersion,
// so two copies that both believe they lead still cannot spend one slot twice.
//
// The holder's expiry is judged on this copy's clock from when it last saw the Lease
// change (as client-go's leaderelection does), never from the holder's renewTime.
import {
  CoordinationV1Api,
  V1MicroTime,
  type KubeConfig,
  type V1Lease,
} from "@kubernetes/client-node";
import { OPERATOR_NAMESPACE } from "../../api/index.js";

/** client-go's defaults for controllers: 15 s lease, renew every 5 s... */
export const LEASE_SECONDS = 15;
export const RENEW_MS = 5_000;
/** ...and a retry every 2 s for those that wait. */
export const RETRY_MS = 2_000;
export const LEASE_NAME = "cluster-operator";

export class LeaseElector {
  private readonly api: CoordinationV1Api;
  private timer: NodeJS.Timeout | undefined;
  private leaderUntil = 0;
  private observed: { rv: string; at: number } | undefined;
  private stopped = true;

  constructor(
    kc: KubeConfig,
    private readonly identity: string,
    private readonly onChange: (leader: boolean) => void,
    private readonly onError: (e: unknown) => void,
    private readonly namespace = OPERATOR_NAMESPACE,
    private readonly name = LEASE_NAME,
  ) {
    this.api = kc.makeApiClient(CoordinationV1Api);
  }

  isLeader(now = Date.now()): boolean {
    return now < this.leaderUntil;
  }

  start(): void {
    this.stopped = false;
    void this.loop();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    const was = this.isLeader();
    this.leaderUntil = 0;
    if (was) {
      this.onChange(false);
      await this.release().catch(() => undefined);
    }
  }

  private async loop(): Promise<void> {
    if (this.stopped) return;
    const was = this.isLeader();
    try {
      await this.tryAcquireOrRenew();
    } catch (e) {
      this.onError(e);
    }
    const is = this.isLeader();
    if (was !== is) this.onChange(is);
    if (this.stopped) return;
    this.timer = setTimeout(() => void this.loop(), is ? RENEW_MS : RETRY_MS);
    this.timer.unref();
  }

  private spec(now: number, transitions: number): V1Lease["spec"] {
    return {
      holderIdentity: this.identity,
      leaseDurationSeconds: LEASE_SECONDS,
      renewTime: new V1MicroTime(now),
      acquireTime: new V1MicroTime(now),
      leaseTransitions: transitions,
    };
  }

  private async read(): Promise<V1Lease | undefined> {
    try {
      return await this.api.readNamespacedLease({ name: this.name, namespace: this.namespace });
    } catch (e) {
      if ((e as { code?: number }).code === 404) return undefined;
      throw e;
    }
  }

  private async tryAcquireOrRenew(): Promise<void> {
    const now = Date.now();
    const lease = await this.read();
    if (lease === undefined) {
      await this.api.createNamespacedLease({
        namespace: this.namespace,
        body: { metadata: { name: this.name }, spec: this.spec(now, 0) },
      });
      this.leaderUntil = now + LEASE_SECONDS * 1000;
      return;
    }
    const holder = lease.spec?.holderIdentity ?? "";
    if (holder !== this.identity && !this.expired(lease, now)) {
      this.leaderUntil = 0;
      return;
    }
    const mine = holder === this.identity;
    const spec = this.spec(now, (lease.spec?.leaseTransitions ?? 0) + (mine ? 0 : 1));
    if (mine && spec !== undefined && lease.spec?.acquireTime !== undefined) {
      spec.acquireTime = lease.spec.acquireTime;
    }
    lease.spec = spec;
    // Conditioned on the resourceVersion just read: two copies cannot both take it.
    const written = await this.api.replaceNamespacedLease({
      name: this.name,
      namespace: this.namespace,
      body: lease,
    });
    this.observed = { rv: written.metadata?.resourceVersion ?? "", at: now };
    this.leaderUntil = now + LEASE_SECONDS * 1000;
  }

  /** Unchanged for a whole lease duration on this copy's clock, or never held. */
  private expired(lease: V1Lease, now: number): boolean {
    const rv = lease.metadata?.resourceVersion ?? "";
    if (this.observed?.rv !== rv) this.observed = { rv, at: now };
    if (!lease.spec?.holderIdentity) return true;
    const duration = (lease.spec.leaseDurationSeconds ?? LEASE_SECONDS) * 1000;
    return now - this.observed.at >= duration;
  }

  private async release(): Promise<void> {
    const lease = await this.api.readNamespacedLease({
      name: this.name,
      namespace: this.namespace,
    });
    if (lease.spec?.holderIdentity !== this.identity) return;
    lease.spec = { ...lease.spec, holderIdentity: "" };
    await this.api.replaceNamespacedLease({
      name: this.name,
      namespace: this.namespace,
      body: lease,
    });
  }
}
