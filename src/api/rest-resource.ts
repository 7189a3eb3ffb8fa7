// One kind over the lean REST client (rest.ts): the reads, writes and watches the agent makes,
// with the same rules as ResourceClient (client.ts) has over client-node: every failure is an
// ApiError, a status write is conditioned on the resourceVersion it was computed from.
import { unlessNotFound } from "./errors.js";
import type { KubeObject, ListOptions, ListResult } from "./client.js";
import type { Rest } from "./rest.js";
import { requireResourceVersion, updateStatusLoop } from "./status-writes.js";
import type { WatchQuery } from "./client.js";
import type { WatchSource } from "./watch.js";

export class RestResource<
  T extends { metadata: KubeObject["metadata"] },
> implements WatchSource<T> {
  /**
   * @param path the collection's URL path, e.g. /apis/liken.sh/v1alpha1/machines or
   *   /apis/coordination.k8s.io/v1/namespaces/liken-heartbeats/leases
   */
  constructor(
    private readonly rest: Rest,
    readonly kind: string,
    readonly path: string,
    private readonly fieldManager: string,
  ) {}

  private op(verb: string, name?: string) {
    return { verb, kind: this.kind, ...(name === undefined ? {} : { name }) };
  }

  private item(name: string, sub = ""): string {
    return `${this.path}/${encodeURIComponent(name)}${sub}`;
  }

  get(name: string): Promise<T> {
    return this.rest.request<T>("GET", this.item(name), { op: this.op("get", name) });
  }

  /** get, or undefined when the object does not exist. */
  find(name: string): Promise<T | undefined> {
    return unlessNotFound(this.get(name));
  }

  async list(opts: ListOptions = {}): Promise<ListResult<T>> {
    const list = await this.rest.request<{ items: T[]; metadata?: { resourceVersion?: string } }>(
      "GET",
      this.path,
      { query: { ...opts }, op: this.op("list") },
    );
    return { items: list.items, resourceVersion: list.metadata?.resourceVersion ?? "" };
  }

  create(obj: T): Promise<T> {
    return this.rest.request<T>("POST", this.path, {
      body: obj,
      query: { fieldManager: this.fieldManager },
      op: this.op("create", obj.metadata.name),
    });
  }

  /** PUT the whole object; refused with 409 when its resourceVersion is stale. */
  replace(obj: T): Promise<T> {
    const name = requireResourceVersion(obj, this.kind, "replace");
    return this.rest.request<T>("PUT", this.item(name), {
      body: obj,
      query: { fieldManager: this.fieldManager },
      op: this.op("replace", name),
    });
  }

  /** PUT the status subresource, conditioned on the object's resourceVersion. */
  replaceStatus(obj: T): Promise<T> {
    const name = requireResourceVersion(obj, this.kind, "update status of");
    return this.rest.request<T>("PUT", this.item(name, "/status"), {
      body: obj,
      query: { fieldManager: this.fieldManager },
      op: this.op("update status of", name),
    });
  }

  /** updateStatusLoop (status-writes.ts), starting from `first` when one is at hand. */
  updateStatus(
    name: string,
    decide: (current: T) => T | undefined | Promise<T | undefined>,
    first?: T,
  ): Promise<T | undefined> {
    return updateStatusLoop(
      { get: (n) => this.get(n), replaceStatus: (o) => this.replaceStatus(o) },
      name,
      decide,
      5,
      first,
    );
  }

  watch(
    query: WatchQuery,
    onEvent: (phase: string, object: unknown) => void,
    onDone: (err: unknown) => void,
  ): Promise<{ abort(): void }> {
    return Promise.resolve(this.rest.watch(this.path, { ...query }, onEvent, onDone));
  }
}
