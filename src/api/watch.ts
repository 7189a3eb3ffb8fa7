// A watched, cached view of one kind: list, then watch from the list's resourceVersion,
// and start over with a fresh list whenever the watch cannot continue. client-node's
// makeInformer stops for good on any error but a 410 and cannot take a field selector;
// liken's daemons must outlive API server restarts and select Machines by spec.cluster.
//
// The life of a watcher:
//   list ──► watch(from rv) ──► events update the cache and reach the handler
//     ▲          │ closed by the server (timeout): watch again from the last rv
//     │          │ 410 Gone (rv too old): list again now
//     └──────────┘ any other error: list again after a backoff (200 ms doubling to 30 s)
// and every `resyncMs` a fresh list replaces the cache (deletes and changes missed for any
// reason are reported then), so the cache never drifts from the server for long.
//
// The watcher itself loads no HTTP client: its source does the list and the watch
// (ResourceClient over client-node for the operator, RestResource over node:https for the
// agent, which must stay small).
import { ApiError, API_ERROR_CODES, parseStatus, toApiError } from "./errors.js";
import type { KubeObject, ListOptions, ListResult, WatchQuery } from "./client.js";

// The query (WatchQuery) sits with the list options it extends, in ./client.ts, which imports
// nothing of the watcher (no import circle).

/** What a ResourceWatcher lists and watches. */
export interface WatchSource<T> {
  readonly kind: string;
  list(opts: ListOptions): Promise<ListResult<T>>;
  /** Opens a watch; `onDone` once when it ends by itself (null: closed normally). */
  watch(
    query: WatchQuery,
    onEvent: (phase: string, object: unknown) => void,
    onDone: (err: unknown) => void,
  ): Promise<{ abort(): void }>;
}

export type WatchEventType = "added" | "modified" | "deleted";

export interface WatchEvent<T> {
  type: WatchEventType;
  object: T;
}

export interface WatchHandlers<T> {
  /** Every change, in server order. */
  onChange?: (event: WatchEvent<T>) => void;
  /** After every list (the first and each re-list): the whole current set. */
  onSync?: (objects: T[]) => void;
  /** A failure the watcher recovers from by itself (it lists again); for logs. */
  onError?: (error: ApiError) => void;
}

export interface WatcherOptions<T = unknown> extends ListOptions {
  /** Re-list this often even when nothing failed (default 5 minutes). */
  resyncMs?: number;
  /** First retry delay after an error (default 200 ms), doubled up to maxBackoffMs. */
  initialBackoffMs?: number;
  /** Longest retry delay (default 30 s). */
  maxBackoffMs?: number;
  /**
   * Watch from this resourceVersion before listing anything (a caller that kept its place,
   * e.g. across a restart, with its own copy of the objects). When the server no longer
   * has it (410 Gone), the watcher lists as usual. start() then resolves once the watch
   * is open or the first list is done.
   */
  resumeFrom?: string;
  /**
   * Applied to every object on arrival (list items, watch events), before it is cached or
   * handed on: a daemon keeps only the fields it reads (the operator: src/operator/run/trim.ts).
   * It may change the object in place: nobody else holds it.
   */
  trim?: (object: T) => T;
}

const DEFAULT_RESYNC_MS = 5 * 60_000;
const DEFAULT_INITIAL_BACKOFF_MS = 200;
const DEFAULT_MAX_BACKOFF_MS = 30_000;
/** A watch that ends sooner than this after it began counts as a failure (no hot loop). */
const MIN_HEALTHY_WATCH_MS = 1_000;

export class ResourceWatcher<T extends { metadata: KubeObject["metadata"] }> {
  private readonly cache = new Map<string, T>();
  private resourceVersion = "";
  private abort: { abort(): void } | undefined;
  private timer: NodeJS.Timeout | undefined;
  private resyncTimer: NodeJS.Timeout | undefined;
  private backoffMs: number;
  private stopped = true;
  /** Bumped on every (re)start, so callbacks of an abandoned watch are ignored. */
  private epoch = 0;
  private relistAfterWatch = false;
  private firstSync: { resolve: () => void; promise: Promise<void> } | undefined;
  /** How many lists were made (the first and each re-list), for tests and metrics. */
  lists = 0;

  constructor(
    private readonly client: WatchSource<T>,
    private readonly handlers: WatchHandlers<T> = {},
    private readonly opts: WatcherOptions<T> = {},
  ) {
    this.backoffMs = opts.initialBackoffMs ?? DEFAULT_INITIAL_BACKOFF_MS;
  }

  /** Starts watching; resolves after the first successful list (retrying until then). */
  start(): Promise<void> {
    if (!this.stopped) return this.firstSync?.promise ?? Promise.resolve();
    this.stopped = false;
    let resolve!: () => void;
    const promise = new Promise<void>((r) => (resolve = r));
    this.firstSync = { resolve, promise };
    const resyncMs = this.opts.resyncMs ?? DEFAULT_RESYNC_MS;
    this.resyncTimer = setInterval(() => this.restart(), resyncMs);
    this.resyncTimer.unref();
    if (this.opts.resumeFrom !== undefined) {
      this.resourceVersion = this.opts.resumeFrom;
      void this.watch(this.epoch);
    } else {
      void this.relist();
    }
    return promise;
  }

  stop(): void {
    this.stopped = true;
    this.epoch++;
    this.abort?.abort();
    this.abort = undefined;
    clearTimeout(this.timer);
    clearInterval(this.resyncTimer);
  }

  get(name: string): T | undefined {
    return this.cache.get(name);
  }

  list(): T[] {
    return [...this.cache.values()];
  }

  /**
   * The resourceVersion the cache has caught up to: its last list, event or bookmark ("" before
   * the first list). Every change up to it is in the cache.
   */
  get version(): string {
    return this.resourceVersion;
  }

  private restart(): void {
    if (this.stopped) return;
    this.epoch++;
    this.abort?.abort();
    this.abort = undefined;
    clearTimeout(this.timer);
    void this.relist();
  }

  private async relist(): Promise<void> {
    const epoch = this.epoch;
    let result;
    try {
      result = await this.client.list(this.selectors());
    } catch (e) {
      if (epoch !== this.epoch || this.stopped) return;
      this.report(toApiError(e, { verb: "list", kind: this.client.kind }));
      this.retryLater(epoch);
      return;
    }
    if (epoch !== this.epoch || this.stopped) return;
    this.lists++;
    this.backoffMs = this.opts.initialBackoffMs ?? DEFAULT_INITIAL_BACKOFF_MS;
    const trim = this.opts.trim;
    this.replaceCache(trim === undefined ? result.items : result.items.map(trim));
    this.resourceVersion = result.resourceVersion;
    this.safely(() => this.handlers.onSync?.(this.list()));
    this.firstSync?.resolve();
    await this.watch(epoch);
  }

  private replaceCache(items: T[]): void {
    const fresh = new Map(items.map((o) => [o.metadata.name, o] as const));
    for (const [name, old] of this.cache) {
      if (!fresh.has(name)) {
        this.cache.delete(name);
        this.emit({ type: "deleted", object: old });
      }
    }
    for (const [name, obj] of fresh) {
      const old = this.cache.get(name);
      this.cache.set(name, obj);
      if (old === undefined) this.emit({ type: "added", object: obj });
      else if (old.metadata.resourceVersion !== obj.metadata.resourceVersion) {
        this.emit({ type: "modified", object: obj });
      }
    }
  }

  private async watch(epoch: number): Promise<void> {
    const began = Date.now();
    this.relistAfterWatch = false;
    const query: WatchQuery = {
      resourceVersion: this.resourceVersion,
      allowWatchBookmarks: true,
      ...this.selectors(),
    };
    const controller = await this.client.watch(
      query,
      (phase: string, obj: unknown) => {
        if (epoch === this.epoch) this.onWatchEvent(phase, obj);
      },
      (err: unknown) => {
        if (epoch === this.epoch) this.onWatchDone(epoch, err, Date.now() - began);
      },
    );
    if (epoch === this.epoch) {
      this.abort = controller;
      if (this.opts.resumeFrom !== undefined) this.firstSync?.resolve();
    } else {
      controller.abort();
    }
  }

  private onWatchEvent(phase: string, obj: unknown): void {
    if (phase === "ERROR") {
      // The server ends the watch after an ERROR event; 410 means our rv is too old.
      const status = parseStatus(obj);
      if (status?.code === 410) this.relistAfterWatch = true;
      else {
        this.report(
          toApiError(
            { code: status?.code ?? 500, body: obj },
            { verb: "watch", kind: this.client.kind },
          ),
        );
      }
      return;
    }
    const raw = obj as T;
    const rv = raw.metadata?.resourceVersion;
    if (rv) this.resourceVersion = rv;
    if (phase === "BOOKMARK") return;
    const object = this.opts.trim === undefined ? raw : this.opts.trim(raw);
    const name = object.metadata.name;
    if (phase === "DELETED") {
      this.cache.delete(name);
      this.emit({ type: "deleted", object });
    } else if (phase === "ADDED" || phase === "MODIFIED") {
      const existed = this.cache.has(name);
      this.cache.set(name, object);
      this.emit({ type: existed ? "modified" : "added", object });
    }
  }

  private onWatchDone(epoch: number, err: unknown, livedMs: number): void {
    if (this.stopped) return;
    this.abort = undefined;
    const gone = isGone(err) || this.relistAfterWatch;
    if (gone) {
      void this.relist();
    } else if (err !== null && err !== undefined) {
      this.report(toApiError(err, { verb: "watch", kind: this.client.kind }));
      this.retryLater(epoch);
    } else if (livedMs < MIN_HEALTHY_WATCH_MS) {
      this.retryLater(epoch);
    } else {
      void this.watch(epoch);
    }
  }

  private retryLater(epoch: number): void {
    const delay = this.backoffMs;
    this.backoffMs = Math.min(delay * 2, this.opts.maxBackoffMs ?? DEFAULT_MAX_BACKOFF_MS);
    this.timer = setTimeout(() => {
      if (epoch === this.epoch && !this.stopped) void this.relist();
    }, delay);
    this.timer.unref();
  }

  private selectors(): ListOptions {
    const s: ListOptions = {};
    if (this.opts.labelSelector !== undefined) s.labelSelector = this.opts.labelSelector;
    if (this.opts.fieldSelector !== undefined) s.fieldSelector = this.opts.fieldSelector;
    return s;
  }

  private emit(event: WatchEvent<T>): void {
    this.safely(() => this.handlers.onChange?.(event));
  }

  private report(error: ApiError): void {
    try {
      this.handlers.onError?.(error);
    } catch {
      // An error handler that throws has nobody left to tell; the watcher carries on.
    }
  }

  /** A throwing handler must not stop the watcher (client-node would swallow it silently). */
  private safely(run: () => void): void {
    try {
      run();
    } catch (e) {
      this.report(
        new ApiError(
          API_ERROR_CODES.usage,
          `a ${this.client.kind} watch handler threw: ${String(e)}`,
          {
            cause: e,
            context: { kind: this.client.kind },
          },
        ),
      );
    }
  }
}

function isGone(err: unknown): boolean {
  if (typeof err !== "object" || err === null) return false;
  const { statusCode, code } = err as { statusCode?: unknown; code?: unknown };
  return statusCode === 410 || code === 410;
}
