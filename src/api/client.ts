// Typed reads and writes of Clusters and Machines over client-node's CustomObjectsApi.
// Three rules hold for every write:
//   - a status write names the resourceVersion it was computed from (the server answers a
//     stale one with 409, which surfaces as ConflictError: re-read, re-decide, write again);
//   - a patch is a JSON merge patch and says so in its Content-Type (the generated client
//     would otherwise send application/json-patch+json);
//   - every failure is an ApiError with a LIKEN_API_* code.
import {
  CustomObjectsApi,
  type KubeConfig,
  PatchStrategy,
  setHeaderOptions,
  Watch,
} from "@kubernetes/client-node";
import { toApiError, unlessNotFound } from "./errors.js";
import { requireResourceVersion, updateStatusLoop } from "./status-writes.js";
import { loadKubeConfig, reuseConnections } from "./kubeconfig.js";
import {
  CLUSTER_KIND,
  CLUSTER_PLURAL,
  GROUP,
  MACHINE_KIND,
  MACHINE_PLURAL,
  VERSION,
  type Cluster,
  type Machine,
} from "./types.js";

/** The objects this layer serves: a kind with metadata, spec and status. */
export interface KubeObject<Spec = unknown, Status = unknown> {
  apiVersion: string;
  kind: string;
  metadata: {
    name: string;
    resourceVersion?: string;
  };
  spec: Spec;
  status?: Status;
}

/** A JSON merge patch (RFC 7386): objects merge, `null` deletes, arrays replace whole. */
export type MergePatch = Record<string, unknown>;

export interface ListOptions {
  labelSelector?: string;
  /** e.g. `spec.cluster=lab` (the Machine CRD declares spec.cluster and spec.nodeName). */
  fieldSelector?: string;
}

/** Query of a watch request: where to start, and which objects. */
export interface WatchQuery extends ListOptions {
  resourceVersion: string;
  allowWatchBookmarks: boolean;
}

export interface ListResult<T> {
  items: T[];
  resourceVersion: string;
}

export interface WriteOptions {
  /** Server-side field manager name, so `kubectl get --show-managed-fields` names the writer. */
  fieldManager?: string;
  dryRun?: boolean;
}

const MERGE_PATCH = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);

/** Reads and writes one cluster-scoped kind of liken.sh/v1alpha1. */
export class ResourceClient<T extends KubeObject> {
  private readonly api: CustomObjectsApi;

  constructor(
    readonly kubeConfig: KubeConfig,
    readonly kind: string,
    readonly plural: string,
    private readonly defaultFieldManager = "liken",
  ) {
    this.api = kubeConfig.makeApiClient(CustomObjectsApi);
  }

  /** The URL path of the collection, for watches. */
  get path(): string {
    return `/apis/${GROUP}/${VERSION}/${this.plural}`;
  }

  /** A watch of the collection (ResourceWatcher's source). */
  watch(
    query: WatchQuery,
    onEvent: (phase: string, object: unknown) => void,
    onDone: (err: unknown) => void,
  ): Promise<AbortController> {
    return new Watch(this.kubeConfig).watch(this.path, { ...query }, onEvent, onDone);
  }

  private base(): { group: string; version: string; plural: string } {
    return { group: GROUP, version: VERSION, plural: this.plural };
  }

  private async call<R>(verb: string, name: string | undefined, run: () => Promise<R>): Promise<R> {
    try {
      return await run();
    } catch (e) {
      throw toApiError(e, { verb, kind: this.kind, ...(name === undefined ? {} : { name }) });
    }
  }

  async get(name: string): Promise<T> {
    return this.call("get", name, () =>
      this.api.getClusterCustomObject({ ...this.base(), name }),
    ) as Promise<T>;
  }

  /** get, or undefined when the object does not exist. */
  find(name: string): Promise<T | undefined> {
    return unlessNotFound(this.get(name));
  }

  async list(opts: ListOptions = {}): Promise<ListResult<T>> {
    const list = (await this.call("list", undefined, () =>
      this.api.listClusterCustomObject({ ...this.base(), ...opts }),
    )) as { items: T[]; metadata?: { resourceVersion?: string } };
    return { items: list.items, resourceVersion: list.metadata?.resourceVersion ?? "" };
  }

  async create(obj: T, opts: WriteOptions = {}): Promise<T> {
    return this.call("create", obj.metadata.name, () =>
      this.api.createClusterCustomObject({ ...this.base(), body: obj, ...this.writeParams(opts) }),
    ) as Promise<T>;
  }

  /** PUT the whole object (spec and metadata); refused with 409 when resourceVersion is stale. */
  async replace(obj: T, opts: WriteOptions = {}): Promise<T> {
    const name = requireResourceVersion(obj, this.kind, "replace");
    return this.call("replace", name, () =>
      this.api.replaceClusterCustomObject({
        ...this.base(),
        name,
        body: obj,
        ...this.writeParams(opts),
      }),
    ) as Promise<T>;
  }

  /**
   * PUT the status subresource. The object's metadata.resourceVersion is the condition:
   * a stale one is refused with ConflictError; a missing one is refused here, because an
   * unconditioned status write could undo another writer's record (a reboot turn).
   */
  async replaceStatus(obj: T, opts: WriteOptions = {}): Promise<T> {
    const name = requireResourceVersion(obj, this.kind, "update status of");
    return this.call("update status of", name, () =>
      this.api.replaceClusterCustomObjectStatus({
        ...this.base(),
        name,
        body: obj,
        ...this.writeParams(opts),
      }),
    ) as Promise<T>;
  }

  /**
   * Merge-patch the object (spec, metadata). Pass `resourceVersion` to make the patch
   * conditional (409 → ConflictError when the object changed since).
   */
  async patch(
    name: string,
    patch: MergePatch,
    opts: WriteOptions & { resourceVersion?: string } = {},
  ): Promise<T> {
    const body = withResourceVersion(patch, opts.resourceVersion);
    return this.call("patch", name, () =>
      this.api.patchClusterCustomObject(
        { ...this.base(), name, body, ...this.writeParams(opts) },
        MERGE_PATCH,
      ),
    ) as Promise<T>;
  }

  /** Merge-patch the status subresource; conditional when `resourceVersion` is given. */
  async patchStatus(
    name: string,
    patch: MergePatch,
    opts: WriteOptions & { resourceVersion?: string } = {},
  ): Promise<T> {
    const body = withResourceVersion(patch, opts.resourceVersion);
    return this.call("patch status of", name, () =>
      this.api.patchClusterCustomObjectStatus(
        { ...this.base(), name, body, ...this.writeParams(opts) },
        MERGE_PATCH,
      ),
    ) as Promise<T>;
  }

  async delete(name: string): Promise<void> {
    await this.call("delete", name, () =>
      this.api.deleteClusterCustomObject({ ...this.base(), name }),
    );
  }

  /**
   * Read, decide, write the status, and on a conflict do all three again with the fresh
   * object. `decide` returns the new object to write, or undefined to write nothing; it must
   * decide from the object it is given (not from anything read before), which is what makes
   * the retry safe: a decision is never replayed onto a state it was not made for.
   */
  async updateStatus(
    name: string,
    decide: (current: T) => T | undefined | Promise<T | undefined>,
    opts: WriteOptions & { attempts?: number } = {},
  ): Promise<T | undefined> {
    return updateStatusLoop(
      { get: (n) => this.get(n), replaceStatus: (o) => this.replaceStatus(o, opts) },
      name,
      decide,
      opts.attempts ?? 5,
    );
  }

  private writeParams(opts: WriteOptions): { fieldManager: string; dryRun?: string } {
    return {
      fieldManager: opts.fieldManager ?? this.defaultFieldManager,
      ...(opts.dryRun === true ? { dryRun: "All" } : {}),
    };
  }
}

function withResourceVersion(patch: MergePatch, resourceVersion: string | undefined): MergePatch {
  if (resourceVersion === undefined) return patch;
  const metadata = (patch.metadata ?? {}) as Record<string, unknown>;
  return { ...patch, metadata: { ...metadata, resourceVersion } };
}

/** The liken.sh API as one object: `api.clusters.get("lab")`, `api.machines.list(...)`. */
export class LikenApi {
  readonly clusters: ResourceClient<Cluster>;
  readonly machines: ResourceClient<Machine>;

  constructor(
    readonly kubeConfig: KubeConfig,
    fieldManager = "liken",
  ) {
    reuseConnections(kubeConfig);
    this.clusters = new ResourceClient<Cluster>(
      kubeConfig,
      CLUSTER_KIND,
      CLUSTER_PLURAL,
      fieldManager,
    );
    this.machines = new ResourceClient<Machine>(
      kubeConfig,
      MACHINE_KIND,
      MACHINE_PLURAL,
      fieldManager,
    );
  }

  /** From a kubeconfig file, or the default (KUBECONFIG, ~/.kube/config, in-cluster). */
  static fromKubeconfig(path?: string, fieldManager?: string): LikenApi {
    return new LikenApi(loadKubeConfig(path), fieldManager);
  }
}
