// The simulated API server: one store of objects with a resourceVersion each, as the real one
// documents it: an update that names a resourceVersion is refused with 409 Conflict unless it
// is the object's current one; every write takes the next resourceVersion of the whole store;
// a watch resumed from a resourceVersion older than the compaction window is refused with
// 410 Gone (the reader lists again). Faults the seed draws: a write refused with 500 (nothing
// written) or answered with 504 after it was applied (a slow write whose reply was lost).
// Left out: admission, validation against the CRD schema, field managers and server-side
// apply, the watch cache's own lag, priority and fairness (429).
//
// The store keeps the objects it is given, uncopied, and hands them out as they are: an object
// once written is never changed in place by anyone (a writer builds a new one, sharing what it
// leaves unchanged), so readers, the history and the store may share it. Copying whole
// objects on every write and read was the simulator's largest cost.
import type { Rng } from "./rng.js";

export interface Stored<T> {
  obj: T;
  rv: number;
}

export type WriteResult = { code: 200; rv: number } | { code: 409 | 500 | 504 | 404 };

/** How many resourceVersions the store keeps events for before a resume is 410 Gone. */
export const COMPACTION_WINDOW = 500;

export class SimApi {
  private rv = 1;
  private readonly objects = new Map<string, Stored<unknown>>();
  /** Probability of a 500 and of a 504-after-apply per write (drawn per run). */
  constructor(
    private readonly rng: Rng,
    readonly faults: { error: number; lostReply: number },
  ) {}

  get version(): number {
    return this.rv;
  }

  get<T>(key: string): Stored<T> | undefined {
    return this.objects.get(key) as Stored<T> | undefined;
  }

  /** Whether a watch at `from` may resume (true) or must list again (410 Gone). */
  canResume(from: number): boolean {
    return this.rv - from <= COMPACTION_WINDOW;
  }

  create<T>(key: string, obj: T): void {
    this.objects.set(key, { obj, rv: ++this.rv });
  }

  delete(key: string): void {
    if (this.objects.delete(key)) this.rv++;
  }

  /**
   * Replace the object; `expect`: the resourceVersion the writer read (a precondition), or
   * undefined for a last-writer-wins write.
   */
  update<T>(key: string, obj: T, expect: number | undefined): WriteResult {
    if (this.rng.chance(this.faults.error)) return { code: 500 };
    const cur = this.objects.get(key);
    if (cur === undefined) return { code: 404 };
    if (expect !== undefined && cur.rv !== expect) return { code: 409 };
    const rv = ++this.rv;
    this.objects.set(key, { obj, rv });
    if (this.rng.chance(this.faults.lostReply)) return { code: 504 };
    return { code: 200, rv };
  }
}
