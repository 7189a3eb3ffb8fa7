// Renewing a heartbeat Lease as the kubelet renews its node Lease: one PUT of the object this
// process last wrote, conditioned on its resourceVersion, and no GET before it. Only when there
// is no such object yet, or the PUT met a newer one (409: someone else wrote it) or none (404:
// deleted), is the Lease read (or created) and written again, once; a second failure is the
// caller's to log, and the next renewal starts from a fresh read.
//
// The HTTP client is the store's business: client-node for the operator and the tests
// (api/heartbeat.ts), node:https for the agent (agent/api.ts), which must stay small.
import { toApiError } from "./errors.js";

/** How a Lease is read, created and renewed over one HTTP client. */
export interface LeaseStore<L> {
  read(name: string): Promise<L | undefined>;
  create(name: string, machine: string, cluster: string, now: Date): Promise<L>;
  /** PUT `base` with a new renewTime; refused with 409 when `base` is stale. */
  renew(name: string, base: L, machine: string, now: Date): Promise<L>;
}

export class LeaseRenewal<L> {
  /** The Lease each machine last wrote, as the server returned it: the next PUT's base. */
  private readonly written = new Map<string, L>();
  /** API requests made, for tests and the bench. */
  requests = 0;

  constructor(private readonly store: LeaseStore<L>) {}

  async renew(name: string, machine: string, cluster: string, now: Date): Promise<L> {
    const op = { verb: "renew heartbeat of", kind: "Machine", name: machine };
    const last = this.written.get(name);
    if (last !== undefined) {
      try {
        this.requests++;
        return this.remember(name, await this.store.renew(name, last, machine, now));
      } catch (e) {
        const err = toApiError(e, op);
        if (err.httpStatus !== 409 && err.httpStatus !== 404) throw err;
        this.written.delete(name);
      }
    }
    try {
      this.requests++;
      const current = await this.store.read(name);
      this.requests++;
      const lease =
        current === undefined
          ? await this.store.create(name, machine, cluster, now)
          : await this.store.renew(name, current, machine, now);
      return this.remember(name, lease);
    } catch (e) {
      throw toApiError(e, op);
    }
  }

  private remember(name: string, lease: L): L {
    this.written.set(name, lease);
    return lease;
  }
}
